/* SPDX-License-Identifier: MIT
 * Private to comm_auto.c and comm_auto_table.c: one communicator's automatic registration, its
 * slots (allocation spans registered with every peer, alike on every rank) and its views. */
#ifndef PCL_COMM_AUTO_INT_H
#define PCL_COMM_AUTO_INT_H

#include <stdatomic.h>
#include <cuda_runtime_api.h>
#include "comm_int.h"
#include "comm_vote.h"
#include "exec.h"
#include "mem.h"
#include "shm.h"

/* Bounded: each slot holds the peers' mappings of one allocation span; the oldest goes first.
 * Views are local and cheap to remake (a program build): the least recently used goes first.
 * Room for the distinct buffers of a training step (two allreduces a layer of a large model's
 * tensor parallelism), as many as the executor keeps programs for by default. */
#define PCL_AUTO_VIEWS 1024
/* Mappings of a slot the turn check looks at per call (a cuMem span may have up to
 * PCL_MEM_MAX_CHUNKS, each two or three driver queries). */
#define PCL_AUTO_SCAN_CHUNKS 16

/* One slot: an allocation span registered with every peer by one agreed exchange. */
struct pcl_auto_alloc {
  int live;
  int dead;      /* dropped by an agreed round, freed at the next call that may free */
  uint32_t gen;  /* alike on every rank: the order of exchanges, for eviction */
  uint64_t base; /* this rank's span [base, base + bytes) */
  uint64_t bytes;
  pcl_mem_chunk_t *chunk; /* [nchunk] the allocations behind the span at the exchange */
  int nchunk;
  uint64_t *span;       /* [nranks] every rank's span base (the exchange round's votes) */
  pcl_exec_window_t *w; /* NULL: the exchange failed (alike everywhere): calls run unregistered */
  cudaEvent_t done;     /* recorded after each planned call through it */
  cudaStream_t stream;  /* where done was recorded last */
  int used;             /* a call ran through it: dropping it waits for that call */
};

/* A call's buffers inside two slots (or one twice), each rank's at its own offset. */
struct pcl_auto_view {
  uint32_t gen[2];
  uint64_t bytes[2];
  uint64_t *off; /* [2][nranks]: into each rank's span */
  pcl_exec_userbuf_t *ub;
  uint64_t tick; /* last use */
};

struct pcl_comm_auto {
  int level;          /* 1: cuMem (POSIX-fd) memory; 2: also cudaMalloc memory */
  uint64_t min_bytes; /* calls below it never vote */
  int timeout_s;
  int nranks;
  int broken; /* a round failed: the ranks no longer agree on the table */
  pcl_shm_t *shm;
  pcl_vote_ledger_t ledger;
  _Atomic int in_round; /* a thread is in pcl_comm_auto_agree (ncclCommAbort waits for it) */
  uint32_t next_gen;
  /* The turn check, beside the call's own buffers: PCL_AUTO_SCAN_CHUNKS mappings of slot
   * scan_slot from scan_chunk on per call, so that a freed allocation is seen even when no call
   * names it again. */
  int scan_slot, scan_chunk;
  struct pcl_auto_alloc a[PCL_VOTE_SLOTS];
  /* The call's buffers' allocations, [2][PCL_MEM_MAX_CHUNKS] (input, output), from the vote to
   * the exchange that may copy them into a slot; and the turn check's. */
  pcl_mem_chunk_t *call_chunk, scan_buf[PCL_AUTO_SCAN_CHUNKS];
  uint64_t *spans; /* [PCL_VOTE_SLOTS][nranks], the slots' span arrays */
  struct pcl_auto_view v[PCL_AUTO_VIEWS];
  uint64_t vkey[PCL_AUTO_VIEWS]; /* v[i]'s view_key, apart: every call's search reads only these */
  int nview;
  uint64_t tick;
  const pcl_exec_userbuf_t *pending; /* the last agreement's view, for pcl_comm_auto_launched */
  int pending_slot[2];
  uint64_t rounds, exchanges, views;
};

/* Frees slot s now: its views, then, once the last kernel through it ended, its window. */
void pcl_auto_slot_drop(struct pcl_comm_auto *t, int s);
/* pcl_vote_apply_fn: marks the round's drops (ctx: the table). */
void pcl_auto_apply_round(void *ctx, const pcl_vote_outcome_t *o);
/* Frees the marked slots; only where this rank may synchronise (outside groups and captures). */
void pcl_auto_flush_dead(struct pcl_comm_auto *t);
/* This rank's vote for a call, and its buffers' identities (id[2]: input, output). */
pcl_vote_t pcl_auto_vote(struct pcl_comm_auto *t, const struct pcl_coll_args *a, uint64_t in_bytes,
                         uint64_t out_bytes, pcl_mem_identity_t id[2]);
/* Collective: registers side k's span (id, and the vote's chunks) in a slot other than `keep`;
 * returns the slot. */
int pcl_auto_exchange(struct pcl_comm_pcl *p, struct pcl_comm_auto *t, int k,
                      const pcl_mem_identity_t *id, int keep);
/* The view of the last round's buffers in slots si (input) and so (output). */
ncclResult_t pcl_auto_view_get(struct pcl_comm_pcl *p, struct pcl_comm_auto *t, int si, int so,
                               uint64_t in_bytes, uint64_t out_bytes, pcl_exec_userbuf_t **ub);

#endif
