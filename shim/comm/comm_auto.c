/* SPDX-License-Identifier: MIT
 * Automatic registration of ordinary buffers (PLANCCL_AUTO_REG): a call whose path registration
 * changes (a zero-copy plan, or a tuning entry for registered buffers) gets the allocations holding
 * its buffers exchanged at their first such call and kept per allocation, keyed by their identity,
 * so that memory freed, remade or remapped is seen and exchanged anew; later calls anywhere in them
 * run through views with each rank's own offsets and no exchange. Each rank sees only its own
 * buffers, so every such call first agrees through a vote in shared host memory (comm_vote.h): the
 * ranks' tables change only by agreed rounds, so they hold the same allocations in the same slots
 * whenever every rank votes from them, and every rank takes the same path. One-host communicators
 * of one rank per process only; never inside a capture or a group, whose calls vote "no" without
 * waiting and leave what they learn (slots to drop) to be carried out at the next call outside
 * them: nothing inside a capture may synchronise or free. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_auto_int.h"
#include "log.h"
#include "param.h"
#include "pcl_check.h"
#include "topo.h"

struct auto_setup {
  int64_t level, min_bytes, ok;
};

static void auto_free(struct pcl_comm_auto *t) {
  if (t == NULL)
    return;
  pcl_free(t->call_chunk);
  pcl_free(t->spans);
  pcl_free(t);
}

ncclResult_t pcl_comm_auto_setup(struct pcl_comm_pcl *p) {
  ncclResult_t res = ncclSuccess;
  struct auto_setup *all = NULL;
  struct pcl_comm_auto *t = NULL;
  pcl_shm_t *shm = NULL;
  const int n = p->nranks;
  if (PCL_CALLOC(all, (size_t)n, "auto-registration setup") == NULL)
    return ncclSystemError;
  all[p->rank].level = pcl_param_auto_reg();
  all[p->rank].min_bytes = pcl_param_auto_reg_min();
  /* Made before the exchange, so that a rank out of host memory is known to all: alike off. */
  if (all[p->rank].level != 0 && PCL_CALLOC(t, 1, "auto-registration") != NULL &&
      (PCL_CALLOC(t->spans, (size_t)PCL_VOTE_SLOTS * (size_t)n, "auto-registration spans") ==
           NULL ||
       PCL_CALLOC(t->call_chunk, 2 * (size_t)PCL_MEM_MAX_CHUNKS, "auto-registration chunks") ==
           NULL)) {
    auto_free(t);
    t = NULL;
  }
  all[p->rank].ok = all[p->rank].level == 0 || t != NULL;
  /* Always exchanged, so that ranks started with different settings agree rather than take
   * part in different numbers of rounds. */
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(p->boot, all, sizeof(*all)), res, done);
  int same = 1, separate = 1, ok = 1;
  for (int r = 0; r < n; r++) {
    same &= all[r].level == all[0].level && all[r].min_bytes == all[0].min_bytes;
    ok &= all[r].ok != 0;
    for (int q = 0; q < r; q++)
      separate &= !pcl_topo_same_process(p->topo, q, r);
  }
  if (all[0].level == 0 && same)
    goto done;
  const char *why = !same                    ? "the ranks set PLANCCL_AUTO_REG(_MIN) differently"
                    : !ok                    ? "a rank is out of host memory"
                    : p->nnodes != 1         ? "the ranks span several hosts"
                    : !separate              ? "a process holds several of its ranks"
                    : n > PCL_VOTE_MAX_RANKS ? "more ranks than one host's vote takes"
                    : p->memchan == NULL     ? "no memory channels"
                                             : NULL;
  if (why != NULL) { /* the same verdict on every rank: every input above is shared */
    if (p->rank == 0)
      PCL_WARN(PCL_LOG_SHIM, "automatic registration is off on this communicator: %s", why);
    goto done;
  }
  /* Collective, and alike on every rank: NULL everywhere when it cannot be made. */
  PCL_CHECK_GOTO(pcl_shm_create(p->boot, pcl_vote_board_bytes(n), &shm), res, done);
  if (shm == NULL) {
    if (p->rank == 0)
      PCL_WARN(PCL_LOG_SHIM, "automatic registration is off: no shared host memory");
    goto done;
  }
  t->level = (int)all[0].level;
  t->min_bytes = (uint64_t)all[0].min_bytes;
  /* The vote waits on the host for ranks that may be busy elsewhere (a checkpoint, an
   * evaluation) where NCCL would just have queued the call: a kernel-sized timeout is too short. */
  const int64_t kt = pcl_param_timeout_s(), bt = pcl_param_bootstrap_timeout_s();
  t->timeout_s = pcl_param_auto_reg_timeout_s() > 0 ? (int)pcl_param_auto_reg_timeout_s()
                                                    : (int)(kt > bt ? kt : bt);
  t->shm = shm;
  t->nranks = n;
  for (int k = 0; k < PCL_VOTE_SLOTS; k++)
    t->a[k].span = t->spans + (size_t)k * (size_t)n;
  pcl_vote_ledger_init(&t->ledger, pcl_shm_ptr(shm), n, p->rank, t->timeout_s, NULL,
                       pcl_auto_apply_round, t);
  PCL_INFO(PCL_LOG_SHIM, "rank %d: automatic registration on (%s memory, calls of %llu bytes up)",
           p->rank, t->level == 1 ? "cuMem" : "cuMem and cudaMalloc",
           (unsigned long long)t->min_bytes);
  p->autoreg = t;
  t = NULL; /* the communicator's now */
done:
  auto_free(t);
  pcl_free(all);
  return res;
}

void pcl_comm_auto_destroy(struct pcl_comm_pcl *p) {
  struct pcl_comm_auto *t = p->autoreg;
  if (t == NULL)
    return;
  /* ncclCommAbort from another thread: the abort flag (set by the caller) ends that thread's
   * wait within milliseconds; the board and the table must outlive it. */
  while (atomic_load(&t->in_round) != 0)
    sched_yield();
  for (int s = 0; s < PCL_VOTE_SLOTS; s++)
    if (t->a[s].live)
      pcl_auto_slot_drop(t, s);
  PCL_INFO(PCL_LOG_SHIM,
           "rank %d: automatic registration: %llu rounds, %llu allocations exchanged, %llu "
           "views made",
           p->rank, (unsigned long long)t->rounds, (unsigned long long)t->exchanges,
           (unsigned long long)t->views);
  pcl_shm_destroy(t->shm);
  auto_free(t);
  p->autoreg = NULL;
}

int pcl_comm_auto_applies(const struct pcl_comm_pcl *p, uint64_t msg_bytes) {
  return p->autoreg != NULL && msg_bytes >= p->autoreg->min_bytes;
}

ncclResult_t pcl_comm_auto_agree(struct pcl_comm_pcl *p, const volatile uint32_t *abort_flag,
                                 const struct pcl_coll_args *a, uint64_t in_bytes,
                                 uint64_t out_bytes, int can, struct pcl_exec_userbuf **ub) {
  struct pcl_comm_auto *t = p->autoreg;
  pcl_vote_t mine;
  pcl_vote_outcome_t o;
  pcl_mem_identity_t id[2];
  ncclResult_t res = ncclSuccess;
  int prev = -1, round_ok = 0;
  memset(&mine, 0, sizeof(mine));    /* PCL_VOTE_NO */
  atomic_fetch_add(&t->in_round, 1); /* before anything of t is touched */
  t->pending = NULL;
  if (t->broken) {
    atomic_fetch_sub(&t->in_round, 1);
    return ncclRemoteError; /* WARNed when it broke */
  }
  t->ledger.abort_flag = abort_flag;
  cudaGetDevice(&prev);
  if (prev != p->cuda_dev)
    cudaSetDevice(p->cuda_dev);
  if (can) {
    /* What earlier rounds dropped (also those read during groups and captures) goes first, and
     * the table is current before this rank's vote is made from it. */
    PCL_CHECK_GOTO(pcl_vote_catch_up(&t->ledger, 1), res, out);
    pcl_auto_flush_dead(t);
    /* Explicit registrations take precedence; every rank must say so (the contract). */
    if (*ub != NULL)
      mine.kind = PCL_VOTE_EXPLICIT;
    else
      mine = pcl_auto_vote(t, a, in_bytes, out_bytes, id);
  }
  t->rounds++;
  PCL_CHECK_GOTO(pcl_vote_round(&t->ledger, mine, &o), res, out);
  if (o.action == PCL_VOTE_USE_EXPLICIT)
    goto out;
  *ub = NULL;
  if (o.action != PCL_VOTE_USE_AUTO)
    goto out;
  /* Every rank voted AUTO, so every rank can: this round's drops go before the slots are
   * chosen, and the tables are alike again. */
  pcl_auto_flush_dead(t);
  int s[2] = {o.slot[0], o.slot[1]};
  if (s[0] == PCL_VOTE_EXCHANGE)
    s[0] = pcl_auto_exchange(p, t, 0, &id[0], s[1]);
  if (s[1] == PCL_VOTE_AS_INPUT)
    s[1] = s[0];
  else if (s[1] == PCL_VOTE_EXCHANGE)
    s[1] = pcl_auto_exchange(p, t, 1, &id[1], s[0]);
  /* The round itself went well: a failure here is this rank's alone, the tables stay alike. */
  round_ok = 1;
  PCL_CHECK_GOTO(pcl_auto_view_get(p, t, s[0], s[1], in_bytes, out_bytes, ub), res, out);
  t->pending = *ub;
  t->pending_slot[0] = s[0];
  t->pending_slot[1] = s[1];
out:
  if (res != ncclSuccess && !round_ok)
    t->broken = 1;
  if (prev != p->cuda_dev && prev >= 0)
    cudaSetDevice(prev);
  atomic_fetch_sub(&t->in_round, 1);
  return res;
}

/* Marks slot s's last use on `stream`. One event covers every stream the slot ran on: a use on
 * another stream than the last makes the new record wait for the old one too (it delays later
 * work of this stream, never the kernel just launched). */
static void slot_used(struct pcl_auto_alloc *x, cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  if (x->done != NULL && x->used && x->stream != stream)
    e = cudaStreamWaitEvent(stream, x->done, 0);
  if (x->done != NULL && e == cudaSuccess)
    e = cudaEventRecord(x->done, stream);
  if (x->done != NULL && e != cudaSuccess) {
    /* Without the event, dropping the slot waits for the whole device. */
    cudaEventDestroy(x->done);
    x->done = NULL;
  }
  x->used = 1;
  x->stream = stream;
}

void pcl_comm_auto_launched(struct pcl_comm_pcl *p, const struct pcl_exec_userbuf *ub,
                            cudaStream_t stream) {
  struct pcl_comm_auto *t = p->autoreg;
  if (t == NULL || t->pending == NULL || t->pending != ub)
    return; /* not the call the last agreement was for */
  slot_used(&t->a[t->pending_slot[0]], stream);
  if (t->pending_slot[1] != t->pending_slot[0])
    slot_used(&t->a[t->pending_slot[1]], stream);
  t->pending = NULL;
}
