/* SPDX-License-Identifier: MIT
 * planccl's resources of one communicator: topology, eligibility and layout, scratch buffer,
 * memory channels inside each host, port channels where plans use them, the executor context. Built
 * collectively; every decision that could differ between ranks (a failed allocation, a different
 * plan set) is agreed through a bootstrap allgather, so either all ranks are planned or all run
 * pass-through. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_int.h"
#include "comm_layout.h"
#include "comm_mps.h"
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
  uint64_t value;      /* a size every rank must share (the scratch), or 0 */
  int32_t ok;          /* this rank's step succeeded */
  int32_t pad;
};

/* One agreement round: 1 when every rank reported ok with the same plans hash and value. */
static ncclResult_t agree_all(pcl_bootstrap_t *boot, int ok, uint64_t hash, uint64_t value,
                              int *all_ok, int *same_plans, int *same_value) {
  int n = pcl_bootstrap_nranks(boot), r = pcl_bootstrap_rank(boot);
  struct agree *all = NULL;
  if (PCL_CALLOC(all, (size_t)n, "agreement") == NULL)
    return ncclSystemError;
  all[r].ok = ok;
  all[r].plans_hash = hash;
  all[r].value = value;
  ncclResult_t res = pcl_bootstrap_allgather(boot, all, sizeof(*all));
  *all_ok = res == ncclSuccess;
  *same_plans = *same_value = 1;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    *all_ok &= all[i].ok != 0;
    *same_plans &= all[i].plans_hash == hash;
    *same_value &= all[i].value == value;
  }
  pcl_free(all);
  return res;
}

static void fill_caps(struct pcl_kernel_caps *caps) {
  memset(caps, 0, sizeof(*caps));
  for (int t = 0; t < (int)ncclNumTypes; t++) {
    if (!pcl_kernels_dtype_supported((ncclDataType_t)t))
      continue;
    caps->dtypes |= 1u << t;
    for (int op = 0; op < (int)ncclNumOps; op++)
      if (pcl_kernels_redop_supported((ncclDataType_t)t, (ncclRedOp_t)op))
        caps->redops[t] |= 1u << op;
  }
}

/* A port channel that failed (a peer's process ended, a broken stream) never delivers what
 * this rank's kernels wait for: they give up now, as on an abort, instead of after
 * PLANCCL_TIMEOUT_S or never; ncclCommGetAsyncError reports the error and later planned calls
 * are refused (dispatch.c). Runs on a transport thread. */
static void port_failed(void *arg, ncclResult_t res) {
  struct pcl_comm_pcl *p = arg;
  PCL_WARN(PCL_LOG_PORT,
           "rank %d: a port channel failed (%s): planned kernels of this "
           "communicator give up",
           p->rank, ncclGetErrorString(res));
  pcl_exec_abort(p->exec);
}

void pcl_comm_res_destroy(struct pcl_comm_pcl *p, int abort) {
  if (p == NULL)
    return;
  pcl_portchan_on_fail(p->portchan, NULL, NULL); /* before the executor it aborts goes */
  int prev = -1;
  cudaGetDevice(&prev);
  cudaSetDevice(p->cuda_dev);
  if (abort && p->exec != NULL)
    pcl_exec_abort(p->exec);
  if (abort)
    pcl_portchan_abort(p->portchan); /* destroy, below, then drops what is still posted */
  /* Our kernels finish (or, aborted, give up) before their channels and scratch go away. A
   * kernel waits only for peers that already launched the same call, so this never waits on a
   * peer that is not itself making progress. */
  cudaDeviceSynchronize();
  pcl_comm_wins_destroy(p); /* views, windows and pairs hold programs and mappings of the context */
  pcl_comm_regs_destroy(p);
  pcl_comm_auto_destroy(p);
  pcl_exec_ctx_destroy(p->exec);
  pcl_portchan_destroy(p->portchan); /* before the memory channels that map its semaphores */
  pcl_memchan_destroy(p->memchan);
  pcl_mem_free(p->scratch);
  pcl_topo_destroy(p->topo);
  pcl_bootstrap_destroy(p->boot);
  if (prev >= 0)
    cudaSetDevice(prev);
  pcl_free(p);
}

#define WHY(...) snprintf(why, whylen, __VA_ARGS__)

/* How the ranks of each host are hosted, as a tuning file names it: threads of one process, or
 * (some ranks of a host in different processes) processes. */
static int process_model(const pcl_topo_t *t) {
  int n = pcl_topo_nranks(t);
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      if (pcl_topo_same_host(t, a, b) && !pcl_topo_same_process(t, a, b))
        return PCL_TUNE_PROCS_PROCESSES;
  return PCL_TUNE_PROCS_THREADS;
}

/* Phase 0: whether the ranks follow their tuning tables. Ranks that read different files (or
 * only some of them one) would select differently: then none follows its table, with one WARN,
 * and the communicator runs on the untuned rules (its layout and plans hash leave the tuned-only
 * plans out). An error only when the exchange failed. */
static ncclResult_t agree_tuning(struct pcl_comm_pcl *p) {
  uint64_t h = pcl_registry_tuning_hash(p->reg, p->nranks, p->ranks_per_node);
  int all_ok = 0, same = 0, same_value = 0;
  PCL_CHECK(agree_all(p->boot, 1, h, 0, &all_ok, &same, &same_value));
  p->tuned = same;
  if (!same && p->rank == 0)
    PCL_WARN(PCL_LOG_INIT | PCL_LOG_PLAN,
             "the ranks of this communicator read different tuning files (or only some of them "
             "one): the untuned rules hold for all of them; check PLANCCL_TUNE_FILE and the "
             "tuning identity on every rank");
  return ncclSuccess;
}

/* Phase 1, from the shared topology and the registry only (comm_layout.c), so every rank reaches
 * the same verdict without talking. 0 = planccl can run, with the layout to build. */
static int check_eligible(struct pcl_comm_pcl *p, pcl_comm_layout_t *l, char *why, size_t whylen) {
  if (pcl_comm_layout_decide(p->topo, p->reg, p->tuned, pcl_param_net(), l, why, whylen) !=
          ncclSuccess ||
      !l->ok)
    return -1;
  p->nnodes = l->nnodes;
  p->net = (int)l->net;
  if (l->nnodes > 1 && p->rank == 0)
    PCL_INFO(PCL_LOG_INIT | PCL_LOG_PORT,
             "multi-node: %d hosts x %d ranks, port channels between hosts over %s (%s)", l->nnodes,
             l->ranks_per_node, pcl_transport_name(l->net), l->net_why);
  return 0;
}

/* Scratch sized from the plans is capped here: the opt-in Simple plans would otherwise ask for up
 * to 448 MiB per communicator at 8 ranks (their whole range); their calls that need more than
 * the cap are refused by the executor, alike on every rank, and go to NCCL.
 * PLANCCL_SCRATCH_BYTES sets the size outright. */
#define PCL_SCRATCH_CAP (64ull << 20)

/* Phase 2: the scratch buffer, the one step that may fail on one rank only, then agreement on
 * it, on its size (the executor refuses a call by it, so every rank must have the same) and on
 * the plan set. 1 = every rank has its scratch, of one size, and the same plans. */
static ncclResult_t alloc_scratch(struct pcl_comm_pcl *p, uint64_t need, int *go, char *why,
                                  size_t whylen) {
  uint64_t scratch = pcl_param_scratch_bytes() > 0
                         ? (uint64_t)pcl_param_scratch_bytes()
                         : (need < PCL_SCRATCH_CAP ? need : PCL_SCRATCH_CAP);
  uint64_t hash = pcl_registry_plans_hash(p->reg, p->nranks, p->ranks_per_node, p->tuned);
  int all_ok = 0, same = 0, same_size = 0;
  scratch = (scratch + 4095) & ~(uint64_t)4095;
  int ok = pcl_mem_alloc(p->cuda_dev, scratch, PCL_MEM_ALLOC_AUTO, &p->scratch) == ncclSuccess;
  PCL_CHECK(agree_all(p->boot, ok, hash, scratch, &all_ok, &same, &same_size));
  *go = 0;
  if (!same)
    WHY("ranks loaded different plans (check PLANCCL_PLAN_DIR on every rank)");
  else if (!same_size)
    WHY("ranks asked for scratch buffers of different sizes (check PLANCCL_SCRATCH_BYTES on every "
        "rank)");
  else if (!all_ok)
    WHY("%s", ok ? "a peer could not allocate its scratch buffer"
                 : "could not allocate the scratch buffer");
  else
    *go = 1;
  /* The agreed size, not what the allocator rounded it to (cuMem rounds to its granularity,
   * cudaMalloc does not, and the ranks may differ in kind): calls are split into segments by it. */
  if (*go)
    p->scratch_bytes = scratch;
  return ncclSuccess;
}

/* Phase 3: memory channels to the peers of the same host, and port channels (a proxy thread)
 * when some selectable plan uses them: the copy engine inside a host, the layout's transport
 * between hosts. Both are collective and agree on their own (all ranks succeed or all fail), so
 * a failure here is the same on every rank. 0 = done. */
static int create_channels(struct pcl_comm_pcl *p, const pcl_comm_layout_t *l, char *why,
                           size_t whylen) {
  pcl_memchan_config_t mcfg;
  memset(&mcfg, 0, sizeof(mcfg));
  mcfg.cuda_dev = p->cuda_dev;
  mcfg.nchannels = l->nmem;
  mcfg.connect = l->mem_connect;
  mcfg.scratch = p->scratch->ptr;
  mcfg.scratch_bytes = p->scratch_bytes;
  if (pcl_memchan_create(p->boot, &mcfg, &p->memchan) != ncclSuccess) {
    p->memchan = NULL;
    WHY("memory channels could not be set up");
    return -1;
  }
  if (l->nport == 0)
    return 0;
  pcl_portchan_config_t pcfg = {.cuda_dev = p->cuda_dev,
                                .bus_id = NULL,
                                .nchannels = l->nport,
                                .kind = l->port_kind,
                                .memchan = p->memchan,
                                .scratch = p->scratch->ptr,
                                .scratch_bytes = p->scratch_bytes};
  const pcl_topo_rank_t *me = pcl_topo_rank_info(p->topo, p->rank);
  if (me != NULL)
    pcfg.bus_id = me->bus_id;
  if (pcl_portchan_create(p->boot, &pcfg, &p->portchan) != ncclSuccess) {
    p->portchan = NULL;
    WHY("port channels could not be set up (%s between hosts)",
        p->nnodes > 1 ? pcl_transport_name((pcl_transport_kind_t)p->net) : "none");
    return -1;
  }
  return 0;
}

/* Phase 4: the executor context (it loads every kernel variant on this device before any can
 * spin), then agreement on it. */
static ncclResult_t create_executor(struct pcl_comm_pcl *p, int *go, char *why, size_t whylen) {
  pcl_exec_config_t ecfg = {.cuda_dev = p->cuda_dev,
                            .rank = p->rank,
                            .nranks = p->nranks,
                            .memchan = p->memchan,
                            .portchan = p->portchan,
                            .scratch = p->scratch->ptr,
                            .scratch_bytes = p->scratch_bytes,
                            .timeout_s = pcl_param_timeout_s(),
                            .dev_ranks = pcl_topo_max_ranks_per_gpu(p->topo)};
  int all_ok = 0, same = 0;
  int ok = pcl_exec_ctx_create(&ecfg, &p->exec) == ncclSuccess;
  if (!ok)
    p->exec = NULL;
  int same_value = 0;
  PCL_CHECK(agree_all(p->boot, ok, 0, 0, &all_ok, &same, &same_value));
  *go = all_ok;
  if (!all_ok)
    WHY("%s", ok ? "a peer could not create its executor" : "could not create the executor");
  return ncclSuccess;
}

ncclResult_t pcl_comm_res_create(pcl_bootstrap_t *boot, int cuda_dev, struct pcl_comm_pcl **out,
                                 char *why, size_t whylen) {
  ncclResult_t res = ncclSuccess;
  struct pcl_comm_pcl *p = NULL;
  pcl_comm_layout_t layout;
  int go = 0;
  memset(&layout, 0, sizeof(layout));
  *out = NULL;
  why[0] = '\0';
  if (PCL_CALLOC(p, 1, "planccl comm part") == NULL) {
    /* Nobody else knows: destroy the bootstrap, whose closed sockets make the peers' next step
     * fail quickly instead of waiting for us. */
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
  if (pcl_topo_create(boot, cuda_dev, &p->topo) != ncclSuccess) {
    WHY("topology discovery failed");
    goto passthrough;
  }
  p->ranks_per_node = pcl_topo_ranks_per_node(p->topo);
  p->local_rank = pcl_topo_local_rank(p->topo, p->rank);
  p->ranks_per_gpu = pcl_topo_max_ranks_per_gpu(p->topo);
  p->procs = process_model(p->topo);
  /* Planned or pass-through, processes sharing a GPU without MPS are slow: say why, once. */
  pcl_comm_mps_warn(p->topo);
  PCL_CHECK_GOTO(agree_tuning(p), res, fail_comm);
  if (check_eligible(p, &layout, why, whylen) != 0)
    goto passthrough;
  PCL_CHECK_GOTO(alloc_scratch(p, layout.scratch_need, &go, why, whylen), res, fail_comm);
  if (!go || create_channels(p, &layout, why, whylen) != 0)
    goto passthrough;
  PCL_CHECK_GOTO(create_executor(p, &go, why, whylen), res, fail_comm);
  if (!go)
    goto passthrough;
  pcl_portchan_on_fail(p->portchan, port_failed, p);
  PCL_CHECK_GOTO(pcl_comm_auto_setup(p), res, fail_comm);
  size_t chan_bytes = 2 * (size_t)p->nranks * (size_t)layout.nmem * 8;
  PCL_INFO(PCL_LOG_INIT | PCL_LOG_SHIM,
           "rank %d/%d dev %d: planccl ready (%d hosts x %d ranks, %d port channels per peer): "
           "GPU memory %.2f MiB (scratch %.2f MiB, channels %zu B x %d per peer, executor state)",
           p->rank, p->nranks, cuda_dev, p->nnodes, p->ranks_per_node, layout.nport,
           (double)(p->scratch_bytes + chan_bytes) / 1048576.0,
           (double)p->scratch_bytes / 1048576.0, chan_bytes, layout.nmem);
  pcl_comm_layout_free(&layout);
  *out = p;
  return ncclSuccess;

fail_comm:
  /* A bootstrap step failed: peers see the same failure (closed sockets, timeouts). */
  WHY("bootstrap agreement failed (%s)", ncclGetErrorString(res));
passthrough:
  pcl_comm_layout_free(&layout);
  pcl_comm_res_destroy(p, 0);
  return ncclSuccess;
}
