/* SPDX-License-Identifier: MIT
 * Automatic registration of ordinary buffers (PLANCCL_AUTO_REG): a call that a zero-copy plan
 * would run registered gets its buffers exchanged at their first such call and kept per buffer
 * pair, keyed by the identity of the allocations behind them, so that a buffer freed, remade or
 * remapped is seen and exchanged anew. Each rank sees only its own buffers, so every such call
 * first agrees through a vote in shared host memory (comm_vote.h): the ranks' tables hold the
 * same generations at all times, and every rank takes the same path. One-host communicators of
 * one rank per process only; never inside a capture or a group, whose calls vote "no" without
 * waiting and leave what they learn (generations to drop) to be carried out at the next call
 * outside them: nothing inside a capture may synchronise or free. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_int.h"
#include "comm_vote.h"
#include "dispatch.h"
#include "exec.h"
#include "log.h"
#include "mem.h"
#include "param.h"
#include "pcl_check.h"
#include "shm.h"
#include "topo.h"

/* Bounded: each pair holds the peers' mappings of its allocations. The oldest goes first. */
#define PCL_AUTO_MAX 64

struct pcl_auto_entry {
  uint32_t gen; /* alike on every rank for the same agreed exchange */
  const void *in, *out;
  uint64_t in_bytes, out_bytes;
  uint64_t id_in, id_out; /* pcl_mem_identity digests at the exchange */
  pcl_exec_userbuf_t *ub; /* NULL: the exchange failed (alike everywhere): runs unregistered */
  cudaEvent_t done;       /* recorded after each planned call on it */
  cudaStream_t stream;    /* where done was recorded last */
  int used;               /* a call ran on it: dropping it waits for that call */
  int dead;               /* dropped by an agreed round, freed at the next call that may free */
};

struct pcl_comm_auto {
  int level;          /* 1: cuMem (POSIX-fd) memory; 2: also cudaMalloc memory */
  uint64_t min_bytes; /* calls below it never vote */
  int timeout_s;
  int broken; /* a round failed: the ranks no longer agree on the table */
  pcl_shm_t *shm;
  pcl_vote_ledger_t ledger;
  _Atomic int in_round; /* a thread is in pcl_comm_auto_agree (ncclCommAbort waits for it) */
  uint32_t next_gen;
  struct pcl_auto_entry e[PCL_AUTO_MAX];
  int n;
  struct pcl_auto_entry *pending; /* returned by the last agreement, for pcl_comm_auto_launched */
  uint64_t rounds, exchanges;
};

struct auto_setup {
  int64_t level, min_bytes, ok;
};

static void apply_round(void *ctx, const pcl_vote_outcome_t *o);

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
  all[p->rank].ok = all[p->rank].level == 0 || PCL_CALLOC(t, 1, "auto-registration") != NULL;
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
  pcl_vote_ledger_init(&t->ledger, pcl_shm_ptr(shm), n, p->rank, t->timeout_s, NULL, apply_round,
                       t);
  PCL_INFO(PCL_LOG_SHIM, "rank %d: automatic registration on (%s memory, calls of %llu bytes up)",
           p->rank, t->level == 1 ? "cuMem" : "cuMem and cudaMalloc",
           (unsigned long long)t->min_bytes);
  p->autoreg = t;
  t = NULL; /* the communicator's now */
done:
  pcl_free(t);
  pcl_free(all);
  return res;
}

static void entry_drop(struct pcl_comm_auto *t, struct pcl_auto_entry *x) {
  /* A kernel still reading the peers' mappings (or they ours) must end first; without an event
   * (it could not be made or recorded) only the whole device tells. */
  if (x->used && x->done != NULL)
    cudaEventSynchronize(x->done);
  else if (x->used)
    cudaDeviceSynchronize();
  if (x->done != NULL)
    cudaEventDestroy(x->done);
  pcl_exec_userbuf_destroy(x->ub);
  if (t->pending == x)
    t->pending = NULL;
  *x = t->e[--t->n];
  if (t->pending == &t->e[t->n])
    t->pending = x;
}

void pcl_comm_auto_destroy(struct pcl_comm_pcl *p) {
  struct pcl_comm_auto *t = p->autoreg;
  if (t == NULL)
    return;
  /* ncclCommAbort from another thread: the abort flag (set by the caller) ends that thread's
   * wait within milliseconds; the board and the table must outlive it. */
  while (atomic_load(&t->in_round) != 0)
    sched_yield();
  while (t->n > 0)
    entry_drop(t, &t->e[t->n - 1]);
  PCL_INFO(PCL_LOG_SHIM, "rank %d: automatic registration: %llu rounds, %llu exchanges", p->rank,
           (unsigned long long)t->rounds, (unsigned long long)t->exchanges);
  pcl_shm_destroy(t->shm);
  pcl_free(t);
  p->autoreg = NULL;
}

int pcl_comm_auto_applies(const struct pcl_comm_pcl *p, uint64_t msg_bytes) {
  return p->autoreg != NULL && msg_bytes >= p->autoreg->min_bytes;
}

/* The live entry of generation gen (dead ones are gone as far as the rounds are concerned). */
static struct pcl_auto_entry *by_gen(struct pcl_comm_auto *t, uint32_t gen) {
  for (int k = 0; k < t->n; k++)
    if (t->e[k].gen == gen && !t->e[k].dead)
      return &t->e[k];
  return NULL;
}

/* A round's drops, in round order (pcl_vote_apply_fn): marked here, freed by flush_dead once
 * this rank is outside any group and capture. */
static void apply_round(void *ctx, const pcl_vote_outcome_t *o) {
  struct pcl_comm_auto *t = ctx;
  for (int k = 0; k < o->ndrop; k++) {
    struct pcl_auto_entry *x = by_gen(t, o->drop[k]);
    if (x != NULL)
      x->dead = 1;
  }
}

static void flush_dead(struct pcl_comm_auto *t) {
  for (int k = t->n - 1; k >= 0; k--)
    if (t->e[k].dead)
      entry_drop(t, &t->e[k]);
}

static int kind_ok(const struct pcl_comm_auto *t, int kind) {
  return kind == PCL_MEM_KIND_CUMEM_FD || (t->level >= 2 && kind == PCL_MEM_KIND_CUDA_IPC);
}

/* This rank's vote: its buffers' identities against its table. */
static pcl_vote_t vote(struct pcl_comm_auto *t, const struct pcl_coll_args *a, uint64_t in_bytes,
                       uint64_t out_bytes, uint64_t *id_in, uint64_t *id_out) {
  pcl_mem_identity_t ii, io;
  pcl_vote_t v = {PCL_VOTE_NO, PCL_VOTE_NONE};
  if (pcl_mem_identity(a->sendbuff, in_bytes, &ii) != ncclSuccess ||
      pcl_mem_identity(a->recvbuff, out_bytes, &io) != ncclSuccess || !kind_ok(t, ii.kind) ||
      !kind_ok(t, io.kind))
    return v;
  *id_in = ii.digest;
  *id_out = io.digest;
  v.kind = PCL_VOTE_MISS;
  for (int k = 0; k < t->n; k++) {
    const struct pcl_auto_entry *x = &t->e[k];
    if (x->dead || x->in != a->sendbuff || x->out != a->recvbuff || x->in_bytes != in_bytes ||
        x->out_bytes != out_bytes)
      continue;
    v.gen = x->gen; /* the pair is unique per address: an exchange drops the old one */
    if (x->id_in == ii.digest && x->id_out == io.digest)
      v.kind = PCL_VOTE_HIT;
    break;
  }
  return v;
}

static void exchange(struct pcl_comm_pcl *p, struct pcl_comm_auto *t, const struct pcl_coll_args *a,
                     uint64_t in_bytes, uint64_t out_bytes, uint64_t id_in, uint64_t id_out) {
  if (t->n == PCL_AUTO_MAX) { /* the oldest generation: the same on every rank */
    struct pcl_auto_entry *old = &t->e[0];
    for (int k = 1; k < t->n; k++)
      if (t->e[k].gen < old->gen)
        old = &t->e[k];
    entry_drop(t, old);
  }
  struct pcl_auto_entry *x = &t->e[t->n++];
  memset(x, 0, sizeof(*x));
  x->gen = t->next_gen++;
  x->in = a->sendbuff;
  x->out = a->recvbuff;
  x->in_bytes = in_bytes;
  x->out_bytes = out_bytes;
  x->id_in = id_in;
  x->id_out = id_out;
  t->exchanges++;
  /* Collective: every rank is here for the same round. A failure fails alike everywhere
   * (memchan.c) and is remembered, so later calls on the pair run unregistered without retrying. */
  ncclResult_t res = pcl_exec_userbuf_create(p->exec, (void *)a->sendbuff, in_bytes, a->recvbuff,
                                             out_bytes, &x->ub);
  if (res != ncclSuccess) {
    x->ub = NULL;
    PCL_WARN(PCL_LOG_SHIM,
             "rank %d: buffers %p/%p could not be registered (%s): calls on them "
             "run unregistered",
             p->rank, a->sendbuff, a->recvbuff, ncclGetErrorString(res));
    return;
  }
  if (cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming) != cudaSuccess)
    x->done = NULL;
  PCL_INFO(PCL_LOG_SHIM, "rank %d: buffers %p +%llu / %p +%llu registered automatically (gen %u)",
           p->rank, a->sendbuff, (unsigned long long)in_bytes, a->recvbuff,
           (unsigned long long)out_bytes, x->gen);
}

ncclResult_t pcl_comm_auto_agree(struct pcl_comm_pcl *p, const volatile uint32_t *abort_flag,
                                 const struct pcl_coll_args *a, uint64_t in_bytes,
                                 uint64_t out_bytes, int can, struct pcl_exec_userbuf **ub) {
  struct pcl_comm_auto *t = p->autoreg;
  pcl_vote_t mine = {PCL_VOTE_NO, PCL_VOTE_NONE};
  pcl_vote_outcome_t o;
  uint64_t id_in = 0, id_out = 0;
  ncclResult_t res = ncclSuccess;
  int prev = -1;
  t->pending = NULL;
  if (t->broken)
    return ncclRemoteError; /* WARNed when it broke */
  atomic_fetch_add(&t->in_round, 1);
  t->ledger.abort_flag = abort_flag;
  cudaGetDevice(&prev);
  if (prev != p->cuda_dev)
    cudaSetDevice(p->cuda_dev);
  if (can) {
    /* What earlier rounds dropped (also those read during groups and captures) goes first, and
     * the table is current before this rank's vote is made from it. */
    PCL_CHECK_GOTO(pcl_vote_catch_up(&t->ledger, 1), res, out);
    /* Explicit registrations take precedence; every rank must say so (the contract). */
    if (*ub != NULL)
      mine.kind = PCL_VOTE_EXPLICIT;
    else
      mine = vote(t, a, in_bytes, out_bytes, &id_in, &id_out);
  }
  t->rounds++;
  PCL_CHECK_GOTO(pcl_vote_round(&t->ledger, mine, &o), res, out);
  if (can)
    flush_dead(t); /* this round's drops and those of the rounds caught up with above */
  struct pcl_auto_entry *x = NULL;
  if (o.action == PCL_VOTE_EXCHANGE) {
    exchange(p, t, a, in_bytes, out_bytes, id_in, id_out);
    x = &t->e[t->n - 1];
  } else if (o.action == PCL_VOTE_USE_GEN) {
    x = by_gen(t, o.gen);
  }
  if (o.action != PCL_VOTE_USE_EXPLICIT)
    *ub = x != NULL ? x->ub : NULL;
  t->pending = x != NULL && x->ub != NULL ? x : NULL;
out:
  if (res != ncclSuccess)
    t->broken = 1;
  if (prev != p->cuda_dev && prev >= 0)
    cudaSetDevice(prev);
  atomic_fetch_sub(&t->in_round, 1);
  return res;
}

void pcl_comm_auto_launched(struct pcl_comm_pcl *p, const struct pcl_exec_userbuf *ub,
                            cudaStream_t stream) {
  struct pcl_comm_auto *t = p->autoreg;
  struct pcl_auto_entry *x = t != NULL ? t->pending : NULL;
  if (x == NULL || x->ub != ub)
    return; /* not the call the last agreement was for */
  /* One event covers every stream the pair ran on: a use on another stream than the last makes
   * the new record wait for the old one too (it delays later work of this stream, never the
   * kernel just launched). */
  cudaError_t e = cudaSuccess;
  if (x->done != NULL && x->used && x->stream != stream)
    e = cudaStreamWaitEvent(stream, x->done, 0);
  if (x->done != NULL && e == cudaSuccess)
    e = cudaEventRecord(x->done, stream);
  if (x->done != NULL && e != cudaSuccess) {
    /* Without the event, dropping the pair waits for the whole device. */
    cudaEventDestroy(x->done);
    x->done = NULL;
  }
  x->used = 1;
  x->stream = stream;
  t->pending = NULL;
}
