/* SPDX-License-Identifier: MIT
 * Exported communicator lifecycle: unique ids, init (rank, config, scalable, all), split, shrink,
 * grow, revoke, finalize, destroy, abort, suspend/resume, async errors and queries. Each call
 * creates or resolves planccl's comm and forwards to the real NCCL with the real comm. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "pcl_abort.h"
#include "alloc.h"
#include "comm_int.h"
#include "portchan.h"
#include "exec.h"
#include "log.h"
#include "pcl_check.h"
#include "shim_int.h"

PCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  PCL_NEED_REAL(ncclGetUniqueId);
  if (uniqueId == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclGetUniqueId: uniqueId argument is NULL");
    return ncclInvalidArgument;
  }
  ncclResult_t res = pcl_errors_real_result(F->ncclGetUniqueId(uniqueId));
  if (res != ncclSuccess || pcl_fallback_called_by_real(PCL_CALLER))
    return res;
  if (pcl_unique_id_fill(uniqueId) != ncclSuccess) {
    /* No bootstrap root: the id still works, its communicators run pass-through. */
    memset(uniqueId->internal + PCL_UNIQUE_ID_PCL_OFFSET, 0,
           NCCL_UNIQUE_ID_BYTES - PCL_UNIQUE_ID_PCL_OFFSET);
  }
  return ncclSuccess;
}
PCL_ALIAS(ncclGetUniqueId)

/* A failed init is said at WARN with the real library's own words (NCCL itself prints nothing
 * unless NCCL_DEBUG asks) and, when it is the cause, that no CUDA device is usable here. */
static void warn_init_failed(ncclResult_t res) {
  if (res == ncclSuccess || res == ncclInProgress)
    return;
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  const char *theirs = F != NULL && F->ncclGetLastError != NULL ? F->ncclGetLastError(NULL) : NULL;
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess)
    (void)cudaGetLastError();
  char dev[160] = "";
  if (e != cudaSuccess || ndev == 0)
    snprintf(dev, sizeof(dev), "; no usable CUDA device here (cudaGetDeviceCount: %s, %d devices)",
             cudaGetErrorString(e), ndev);
  PCL_WARN(PCL_LOG_SHIM | PCL_LOG_INIT, "communicator init failed in the real NCCL: %s%s%s%s",
           ncclGetErrorString(res), theirs != NULL && theirs[0] ? "; NCCL's last error: " : "",
           theirs != NULL ? theirs : "", dev);
}

/* Hands the new comm to the caller, or frees it when the real library created nothing. A comm
 * whose real pointer is still NULL is kept when the real init was deferred (inside a group) or is
 * in progress (non-blocking): the real library fills c->real later. */
static ncclResult_t finish_create(struct ncclComm *c, ncclComm_t *out, ncclResult_t res) {
  int deferred = pcl_group_depth() > 0 || res == ncclInProgress;
  if (pcl_comm_real(c) != NULL || (res == ncclSuccess && deferred) || res == ncclInProgress) {
    c->init_in_progress = res == ncclInProgress;
    *out = c;
    return res;
  }
  pcl_comm_destroy(c);
  *out = NULL;
  warn_init_failed(res);
  return res;
}

/* planccl's setup of a new comm (comm_init.c), beside the real init: now, on a helper thread
 * (non-blocking) or at the outermost ncclGroupEnd. The device is the caller's current one at
 * the init call, as in NCCL. */
static ncclResult_t start_init(struct ncclComm *c, const ncclUniqueId *id, int rank, int nranks,
                               ncclResult_t real_res, const ncclConfig_t *config) {
  struct pcl_setup_job job;
  memset(&job, 0, sizeof(job));
  job.c = c;
  job.kind = PCL_JOB_INIT;
  job.rank = rank;
  job.nranks = nranks;
  job.has_handle = pcl_unique_id_get(id, &job.handle);
  job.cuda_dev = -1;
  if (pcl_setup_possible() && cudaGetDevice(&job.cuda_dev) != cudaSuccess)
    job.cuda_dev = -1;
  c->cuda_dev = job.cuda_dev;
  c->nonblocking = real_res == ncclInProgress || (config != NULL && config->blocking == 0);
  return pcl_setup_submit(&job);
}

static ncclResult_t check_init(const char *fn, ncclComm_t *comm, int nranks, int rank) {
  if (comm == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "%s: comm argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    PCL_WARN(PCL_LOG_SHIM, "%s: invalid rank %d for nranks %d", fn, rank, nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

PCL_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  PCL_NEED_REAL(ncclCommInitRank);
  if (pcl_fallback_called_by_real(PCL_CALLER))
    return F->ncclCommInitRank(comm, nranks, commId, rank);
  PCL_CHECK(check_init("ncclCommInitRank", comm, nranks, rank));
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(rank, nranks, NULL, &c));
  ncclResult_t res = pcl_errors_real_result(F->ncclCommInitRank(&c->real, nranks, commId, rank));
  res = finish_create(c, comm, res);
  if (*comm != NULL)
    PCL_CHECK(start_init(c, &commId, rank, nranks, res, NULL));
  return res;
}
PCL_ALIAS(ncclCommInitRank)

PCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                            int rank, ncclConfig_t *config) {
  PCL_NEED_REAL(ncclCommInitRankConfig);
  if (pcl_fallback_called_by_real(PCL_CALLER))
    return F->ncclCommInitRankConfig(comm, nranks, commId, rank, config);
  PCL_CHECK(check_init("ncclCommInitRankConfig", comm, nranks, rank));
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(rank, nranks, NULL, &c));
  /* The caller's config pointer goes through unchanged: the real library applies NCCL's size /
   * magic / version rules to it. */
  ncclResult_t res =
      pcl_errors_real_result(F->ncclCommInitRankConfig(&c->real, nranks, commId, rank, config));
  res = finish_create(c, comm, res);
  if (*comm != NULL)
    PCL_CHECK(start_init(c, &commId, rank, nranks, res, config));
  return res;
}
PCL_ALIAS(ncclCommInitRankConfig)

PCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                              ncclUniqueId *commIds, ncclConfig_t *config) {
  PCL_NEED_REAL(ncclCommInitRankScalable);
  PCL_CHECK(check_init("ncclCommInitRankScalable", newcomm, nranks, myrank));
  if (nId < 1 || commIds == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommInitRankScalable: invalid ids (nId %d, commIds %p)", nId,
             (void *)commIds);
    return ncclInvalidArgument;
  }
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(myrank, nranks, NULL, &c));
  ncclResult_t res = pcl_errors_real_result(
      F->ncclCommInitRankScalable(&c->real, nranks, myrank, nId, commIds, config));
  res = finish_create(c, newcomm, res);
  /* planccl's bootstrap is not hierarchical: the first id's root serves every rank. */
  if (*newcomm != NULL)
    PCL_CHECK(start_init(c, &commIds[0], myrank, nranks, res, config));
  return res;
}
PCL_ALIAS(ncclCommInitRankScalable)

PCL_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  PCL_NEED_REAL(ncclCommInitAll);
  if (comms == NULL || ndev < 1) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommInitAll: invalid arguments (comms %p, ndev %d)", (void *)comms,
             ndev);
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclSuccess;
  struct ncclComm **cs = NULL;
  ncclComm_t *reals = NULL;
  struct pcl_setup_job **jobs = NULL;
  int made = 0, njobs = 0;
  if (PCL_CALLOC(cs, (size_t)ndev, "ncclCommInitAll comms") == NULL ||
      PCL_CALLOC(reals, (size_t)ndev, "ncclCommInitAll real comms") == NULL) {
    res = ncclSystemError;
    goto out;
  }
  for (; made < ndev; made++)
    PCL_CHECK_GOTO(pcl_comm_create(made, ndev, NULL, &cs[made]), res, out);
  /* The real library fills a contiguous array; it creates its comms synchronously. */
  res = pcl_errors_real_result(F->ncclCommInitAll(reals, ndev, devlist));
  int all = res == ncclSuccess;
  for (int i = 0; i < ndev; i++)
    all &= reals[i] != NULL;
  if (all) {
    /* planccl's part: one bootstrap root for the ndev ranks, whose setups run on one thread
     * each (the bootstrap needs every rank present at once). */
    pcl_bootstrap_handle_t h;
    memset(&h, 0, sizeof(h));
    int has = pcl_setup_possible() && pcl_bootstrap_root_create(&h) == ncclSuccess;
    PCL_CALLOC(jobs, (size_t)ndev, "ncclCommInitAll setups");
    for (int i = 0; jobs != NULL && i < ndev; i++) {
      struct pcl_setup_job job;
      memset(&job, 0, sizeof(job));
      job.c = cs[i];
      job.kind = PCL_JOB_INIT;
      job.handle = h;
      job.has_handle = has;
      job.rank = i;
      job.nranks = ndev;
      job.cuda_dev = has ? (devlist ? devlist[i] : i) : -1;
      cs[i]->cuda_dev = job.cuda_dev;
      if (PCL_CALLOC(jobs[i], 1, "ncclCommInitAll setup") == NULL)
        break;
      *jobs[i] = job;
      njobs++;
    }
    if (njobs < ndev) {
      /* Out of memory before every rank had a job: no rank may bootstrap (it would wait for
       * the missing ones), so every job degrades to pass-through. */
      for (int i = 0; i < njobs; i++)
        jobs[i]->has_handle = 0;
      for (int i = njobs; i < ndev; i++) {
        struct pcl_setup_job job;
        memset(&job, 0, sizeof(job));
        job.c = cs[i];
        job.cuda_dev = -1;
        pcl_setup_submit(&job);
      }
    }
    if (jobs != NULL)
      pcl_setup_run_all(jobs, njobs);
  }
  for (int i = 0; i < ndev; i++) {
    if (reals[i] != NULL) {
      __atomic_store_n(&cs[i]->real, reals[i], __ATOMIC_RELEASE);
      if (!all) { /* no planccl setup ran: pass-through, said at INFO */
        struct pcl_setup_job job;
        memset(&job, 0, sizeof(job));
        job.c = cs[i];
        job.cuda_dev = -1;
        pcl_setup_submit(&job);
      }
      comms[i] = cs[i];
      cs[i] = NULL;
    } else if (res == ncclSuccess) {
      comms[i] = NULL;
    }
  }
out:
  pcl_free(jobs);
  for (int i = 0; i < made; i++)
    if (cs[i] != NULL)
      pcl_comm_destroy(cs[i]);
  pcl_free(reals);
  pcl_free(cs);
  return res;
}
PCL_ALIAS(ncclCommInitAll)

/* Where the real library writes the NULL child of an NCCL_SPLIT_NOCOLOR split; it may write it
 * later (non-blocking parent), so it must outlive the call. */
static ncclComm_t nocolor_sink;

PCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config) {
  PCL_NEED_REAL(ncclCommSplit);
  struct ncclComm *p;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup_real("ncclCommSplit", comm, PCL_CALLER, &p, &real));
  if (newcomm == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommSplit: newcomm argument is NULL");
    return ncclInvalidArgument;
  }
  struct pcl_setup_job job;
  memset(&job, 0, sizeof(job));
  job.kind = PCL_JOB_SPLIT;
  job.parent = p;
  job.color = color;
  job.key = key;
  job.cuda_dev = p != NULL ? p->cuda_dev : -1;
  if (color == NCCL_SPLIT_NOCOLOR) {
    ncclResult_t res =
        pcl_errors_real_result(F->ncclCommSplit(real, color, key, &nocolor_sink, config));
    *newcomm = NULL;
    /* planccl's split is collective over the parent: this rank takes part without a child. */
    if (p != NULL)
      PCL_CHECK(pcl_setup_submit(&job));
    return res;
  }
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(-1, -1, p, &c));
  ncclResult_t res = pcl_errors_real_result(F->ncclCommSplit(real, color, key, &c->real, config));
  res = finish_create(c, newcomm, res);
  if (*newcomm != NULL) {
    job.c = c;
    c->cuda_dev = job.cuda_dev;
    c->nonblocking = res == ncclInProgress || (config != NULL && config->blocking == 0) ||
                     (p != NULL && p->nonblocking && config == NULL);
    PCL_CHECK(pcl_setup_submit(&job));
  }
  return res;
}
PCL_ALIAS(ncclCommSplit)

PCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                    ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  PCL_NEED_REAL(ncclCommShrink);
  struct ncclComm *p;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup_real("ncclCommShrink", comm, PCL_CALLER, &p, &real));
  if (newcomm == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommShrink: newcomm argument is NULL");
    return ncclInvalidArgument;
  }
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(-1, -1, p, &c));
  ncclResult_t res = pcl_errors_real_result(
      F->ncclCommShrink(real, excludeRanksList, excludeRanksCount, &c->real, config, shrinkFlags));
  res = finish_create(c, newcomm, res);
  if (*newcomm != NULL) {
    struct pcl_setup_job job;
    memset(&job, 0, sizeof(job));
    job.c = c;
    job.kind = PCL_JOB_SHRINK;
    job.parent = p;
    job.exclude = excludeRanksList;
    job.nexclude = excludeRanksList != NULL && excludeRanksCount > 0 ? excludeRanksCount : 0;
    job.shrink_flags = shrinkFlags;
    job.cuda_dev = c->cuda_dev = p != NULL ? p->cuda_dev : -1;
    c->nonblocking = res == ncclInProgress || (config != NULL && config->blocking == 0);
    PCL_CHECK(pcl_setup_submit(&job));
  }
  return res;
}
PCL_ALIAS(ncclCommShrink)

PCL_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  PCL_NEED_REAL(ncclCommRevoke);
  struct ncclComm *c;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup_real("ncclCommRevoke", comm, PCL_CALLER, &c, &real));
  return pcl_errors_real_result(F->ncclCommRevoke(real, revokeFlags));
}
PCL_ALIAS(ncclCommRevoke)

PCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  PCL_NEED_REAL(ncclCommFinalize);
  struct ncclComm *c;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup_real("ncclCommFinalize", comm, PCL_CALLER, &c, &real));
  return pcl_errors_real_result(F->ncclCommFinalize(real));
}
PCL_ALIAS(ncclCommFinalize)

/* Destroy and abort: NULL is success (NCCL's behaviour); a second destroy is refused. */
static ncclResult_t teardown(const char *fn, ncclComm_t comm, int abort, const void *caller) {
  if (comm == NULL)
    return ncclSuccess;
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return pcl_fallback_none(fn);
  struct ncclComm *c;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup(fn, comm, caller, &c, &real));
  if (real != NULL && (abort ? (void *)F->ncclCommAbort : (void *)F->ncclCommDestroy) == NULL)
    return pcl_fallback_missing(fn);
  struct pcl_comm_pcl *mine = NULL;
  if (c != NULL) {
    /* A setup still bootstrapping gives up (it polls the flag); then planccl's part goes:
     * destroy waits for this device's queued work, abort first stops our kernels. */
    pcl_abort_set(&c->abort_flag);
    pcl_setup_join(c, 1);
    /* A child of a pass-through parent (split, shrink) never learnt its rank from planccl's
     * bootstrap: ask the real communicator, still alive here, so the stats name it. */
    pcl_comm_learn_ranks(c);
    pcl_stats_print(c);
    mine = c->pcl;
    c->pcl = NULL;
    if (abort && mine != NULL && mine->exec != NULL)
      pcl_exec_abort(mine->exec);
    if (!abort)
      pcl_comm_res_destroy(mine, 0);
  }
  ncclResult_t res = ncclSuccess;
  if (real != NULL)
    res = pcl_errors_real_result(abort ? F->ncclCommAbort(real) : F->ncclCommDestroy(real));
  if (c != NULL) {
    if (abort)
      pcl_comm_res_destroy(mine, 1); /* after the real abort stopped its kernels */
    pcl_stats_destroy(c->stats);
    c->stats = NULL;
    /* The wrapper goes even when the real call failed: the handle is unusable either way. */
    pcl_comm_destroy(c);
  }
  return res;
}

PCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return teardown("ncclCommDestroy", comm, 0, PCL_CALLER);
}
PCL_ALIAS(ncclCommDestroy)

PCL_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return teardown("ncclCommAbort", comm, 1, PCL_CALLER);
}
PCL_ALIAS(ncclCommAbort)

PCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  PCL_NEED_REAL(ncclCommGetAsyncError);
  if (asyncError == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommGetAsyncError: asyncError argument is NULL");
    return ncclInvalidArgument;
  }
  struct ncclComm *c;
  ncclComm_t real;
  PCL_CHECK(pcl_comm_lookup("ncclCommGetAsyncError", comm, PCL_CALLER, &c, &real));
  if (real == NULL) {
    /* Init deferred to a group that has not ended, or a non-blocking init whose real comm is not
     * written yet: in progress. Otherwise the deferred init failed at its group end. */
    *asyncError = pcl_group_depth() > 0 || c->init_in_progress ? ncclInProgress : ncclInvalidUsage;
    return ncclSuccess;
  }
  /* Polling the real comm is what drives a non-blocking init or split to completion. */
  ncclResult_t res = pcl_errors_real_result(F->ncclCommGetAsyncError(real, asyncError));
  if (res == ncclSuccess && c != NULL && *asyncError == ncclSuccess) {
    int state = pcl_setup_state(c);
    if (state != PCL_SETUP_DONE) {
      /* planccl's part still bootstrapping (helper thread) or deferred to a group end. */
      *asyncError = ncclInProgress;
      return res;
    }
    pcl_setup_join(c, 0);
    int mine = atomic_load(&c->async_error);
    struct pcl_comm_pcl *p = c->pcl;
    /* planccl's own errors: a kernel that gave up, or the proxy, which stops for good at its
     * first error (a port transport's send, copy or receiver) so kernels waiting on its
     * channels would wait for ever: the caller learns either here and aborts the communicator,
     * as after an NCCL transport error. Latched and WARNed once. */
    const char *what = NULL;
    /* The port channels first: their failure aborts the kernels, so it is the cause. */
    if (mine == ncclSuccess && p != NULL && p->portchan != NULL &&
        (mine = pcl_portchan_error(p->portchan)) != ncclSuccess)
      what = "planccl's port channels failed: abort the communicator (ncclCommAbort)";
    if (mine == ncclSuccess && p != NULL && p->exec != NULL &&
        (mine = pcl_exec_async_error(p->exec, NULL)) != ncclSuccess)
      what = "a planccl kernel failed: timeout (PLANCCL_TIMEOUT_S) or abort";
    if (what != NULL) {
      atomic_store(&c->async_error, mine);
      PCL_WARN(PCL_LOG_SHIM | PCL_LOG_EXEC, "communicator %p rank %d: %s (%s)", (void *)c, c->rank,
               what, ncclGetErrorString((ncclResult_t)mine));
    }
    if (mine != ncclSuccess)
      *asyncError = (ncclResult_t)mine;
  }
  return res;
}
PCL_ALIAS(ncclCommGetAsyncError)

#define PCL_QUERY(fn, what)                                                                        \
  PCL_API ncclResult_t fn(const ncclComm_t comm, int *what) {                                      \
    PCL_NEED_REAL(fn);                                                                             \
    if (what == NULL) {                                                                            \
      PCL_WARN(PCL_LOG_SHIM, "%s: %s argument is NULL", #fn, #what);                               \
      return ncclInvalidArgument;                                                                  \
    }                                                                                              \
    struct ncclComm *c;                                                                            \
    ncclComm_t real;                                                                               \
    PCL_CHECK(pcl_comm_lookup_real(#fn, comm, PCL_CALLER, &c, &real));                             \
    return pcl_errors_real_result(F->fn(real, what));                                              \
  }                                                                                                \
  PCL_ALIAS(fn)

PCL_QUERY(ncclCommCount, count)
PCL_QUERY(ncclCommCuDevice, device)
PCL_QUERY(ncclCommUserRank, rank)

/* ---- NCCL 2.29: memory offload, grow, properties ---- */

/* Suspend and resume release and restore the real NCCL's memory. NCCL forbids collectives on a
 * suspended communicator, and planccl's plans would still run on one (its kernels use its own
 * buffers), so planccl marks the communicator once the real suspend succeeded and refuses every
 * collective, planned or forwarded, one-sided call and registration on it until a resume
 * succeeds (pcl_comm_refuse_suspended). The mark follows the real state: a failed real call
 * leaves it as it was, and a suspend of a suspended communicator or a resume of a running one is
 * whatever the real NCCL answers. ncclInProgress (non-blocking) counts as done: the suspend is
 * under way, and planccl's own resources, which a resume restores, never left.
 * planccl's own buffers (scratch, channels, programs) stay allocated while suspended: they are
 * small beside NCCL's, and re-creating them would re-map every peer's memory, which needs every
 * rank in a collective step that suspend and resume do not promise. */
static ncclResult_t set_suspended(struct ncclComm *c, ncclResult_t res, int suspended) {
  if (c != NULL && (res == ncclSuccess || res == ncclInProgress))
    atomic_store_explicit(&c->suspended, suspended, memory_order_relaxed);
  return res;
}

PCL_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  PCL_NEED_COMM(ncclCommSuspend, comm);
  return set_suspended(c, pcl_errors_real_result(F->ncclCommSuspend(real, flags)), 1);
}
PCL_ALIAS(ncclCommSuspend)

PCL_API ncclResult_t ncclCommResume(ncclComm_t comm) {
  PCL_NEED_COMM(ncclCommResume, comm);
  return set_suspended(c, pcl_errors_real_result(F->ncclCommResume(real)), 0);
}
PCL_ALIAS(ncclCommResume)

/* The real NCCL's memory; planccl's own is not counted. */
PCL_API ncclResult_t ncclCommMemStats(ncclComm_t comm, pcl_comm_mem_stat_t stat, uint64_t *value) {
  PCL_NEED_COMM(ncclCommMemStats, comm);
  return pcl_errors_real_result(F->ncclCommMemStats(real, stat, value));
}
PCL_ALIAS(ncclCommMemStats)

/* The id of a grow is the real NCCL's alone: planccl adds no part of its own to it, since a grown
 * communicator runs pass-through (ncclCommGrow). */
PCL_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId) {
  PCL_NEED_COMM(ncclCommGetUniqueId, comm);
  return pcl_errors_real_result(F->ncclCommGetUniqueId(real, uniqueId));
}
PCL_ALIAS(ncclCommGetUniqueId)

/* The real NCCL grows the communicator into planccl's new wrapper, as a split does; the caller
 * gets planccl's handle, never the real one. planccl cannot extend its own part (bootstrap,
 * channels) to ranks that join, so the grown communicator runs pass-through: every call on it is
 * forwarded. A rank that joins has no communicator yet (comm == NULL), as in NCCL. */
PCL_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                  int rank, ncclComm_t *newcomm, ncclConfig_t *config) {
  PCL_NEED_REAL(ncclCommGrow);
  if (pcl_fallback_called_by_real(PCL_CALLER))
    return F->ncclCommGrow(comm, nRanks, uniqueId, rank, newcomm, config);
  if (newcomm == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclCommGrow: newcomm argument is NULL");
    return ncclInvalidArgument;
  }
  struct ncclComm *p = NULL;
  ncclComm_t real = NULL;
  if (comm != NULL)
    PCL_CHECK(pcl_comm_lookup_real("ncclCommGrow", comm, PCL_CALLER, &p, &real));
  struct ncclComm *c;
  PCL_CHECK(pcl_comm_create(-1, -1, p, &c));
  ncclResult_t res =
      pcl_errors_real_result(F->ncclCommGrow(real, nRanks, uniqueId, rank, &c->real, config));
  res = finish_create(c, newcomm, res);
  if (*newcomm == NULL)
    return res;
  c->cuda_dev = p != NULL ? p->cuda_dev : -1;
  c->nonblocking = res == ncclInProgress || (config != NULL && config->blocking == 0);
  PCL_INFO(PCL_LOG_SHIM | PCL_LOG_INIT,
           "ncclCommGrow: communicator %p runs pass-through (planccl cannot set up its own part "
           "for a grown communicator yet)",
           (void *)c);
  /* An init without planccl's part of the id: the setup only marks the comm pass-through. */
  struct pcl_setup_job job;
  memset(&job, 0, sizeof(job));
  job.c = c;
  job.kind = PCL_JOB_INIT;
  job.cuda_dev = -1;
  PCL_CHECK(pcl_setup_submit(&job));
  return res;
}
PCL_ALIAS(ncclCommGrow)

/* Declared in nccl_device/host.h; the properties are the real communicator's, which has the same
 * ranks and device as planccl's. */
PCL_API ncclResult_t ncclCommQueryProperties(ncclComm_t comm, pcl_comm_properties_t *props) {
  PCL_NEED_COMM(ncclCommQueryProperties, comm);
  return pcl_errors_real_result(F->ncclCommQueryProperties(real, props));
}
PCL_ALIAS(ncclCommQueryProperties)
