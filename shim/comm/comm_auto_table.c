/* SPDX-License-Identifier: MIT
 * Automatic registration's table (comm_auto_int.h): this rank's vote from its slots, the agreed
 * exchanges into slots, the drops, and the views of a call's buffers at every rank's offsets. */
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_auto_int.h"
#include "log.h"
#include "pcl_check.h"

static void view_drop(struct pcl_comm_auto *t, int i) {
  struct pcl_auto_view *x = &t->v[i];
  if (t->pending != NULL && t->pending == x->ub)
    t->pending = NULL;
  pcl_exec_userbuf_destroy(x->ub); /* its programs go too; a running one's image waits */
  pcl_free(x->off);
  t->nview--;
  t->v[i] = t->v[t->nview];
  t->vkey[i] = t->vkey[t->nview];
}

/* Frees slot s: its views, then, once the last kernel through it ended, its window. */
void pcl_auto_slot_drop(struct pcl_comm_auto *t, int s) {
  struct pcl_auto_alloc *x = &t->a[s];
  for (int i = t->nview - 1; i >= 0; i--)
    if (t->v[i].gen[0] == x->gen || t->v[i].gen[1] == x->gen)
      view_drop(t, i);
  /* A kernel still reading the peers' mappings (or they ours) must end first; without an event
   * (it could not be made or recorded) only the whole device tells. */
  if (x->used && x->done != NULL)
    cudaEventSynchronize(x->done);
  else if (x->used)
    cudaDeviceSynchronize();
  if (x->done != NULL)
    cudaEventDestroy(x->done);
  pcl_exec_window_destroy(x->w);
  pcl_free(x->chunk);
  uint64_t *span = x->span;
  memset(x, 0, sizeof(*x));
  x->span = span;
}

/* A round's drops, in round order (pcl_vote_apply_fn): marked here, freed by pcl_auto_flush_dead
 * once this rank is outside any group and capture. Slots name the same allocation on every rank:
 * the tables change only by agreed rounds, applied in the same order everywhere. */
void pcl_auto_apply_round(void *ctx, const pcl_vote_outcome_t *o) {
  struct pcl_comm_auto *t = ctx;
  for (int s = 0; s < PCL_VOTE_SLOTS; s++) {
    struct pcl_auto_alloc *x = &t->a[s];
    if (!(o->drop >> s & 1u) || !x->live || x->dead)
      continue;
    x->dead = 1;
    PCL_INFO(PCL_LOG_SHIM,
             "rank %d: slot %d, allocation %p +%llu dropped: its memory changed here or on a "
             "peer",
             t->ledger.rank, s, (void *)(uintptr_t)x->base, (unsigned long long)x->bytes);
  }
}

void pcl_auto_flush_dead(struct pcl_comm_auto *t) {
  for (int s = 0; s < PCL_VOTE_SLOTS; s++)
    if (t->a[s].live && t->a[s].dead)
      pcl_auto_slot_drop(t, s);
}

static int kind_ok(const struct pcl_comm_auto *t, int kind) {
  return kind == PCL_MEM_KIND_CUMEM_FD || (t->level >= 2 && kind == PCL_MEM_KIND_CUDA_IPC);
}

/* One side's vote: which live slots hold [ptr, + bytes) unchanged; those that hold its
 * addresses but not its memory any more are stale. 0 when the buffer cannot be registered. */
static int side_vote(const struct pcl_comm_auto *t, const void *ptr, uint64_t bytes,
                     pcl_mem_identity_t *id, pcl_mem_chunk_t *chunk, pcl_vote_side_t *sd,
                     uint64_t *stale) {
  const uint64_t p = (uintptr_t)ptr;
  if (pcl_mem_identity_chunks(ptr, bytes, id, chunk, (int)PCL_MEM_MAX_CHUNKS) != ncclSuccess ||
      !kind_ok(t, id->kind))
    return 0;
  sd->ptr = p;
  sd->span = id->base;
  sd->held = 0;
  for (int s = 0; s < PCL_VOTE_SLOTS; s++) {
    const struct pcl_auto_alloc *x = &t->a[s];
    if (!x->live || x->dead || p < x->base || bytes > x->bytes || p - x->base > x->bytes - bytes)
      continue;
    /* Only the allocations under the buffer matter to a call through the slot (the peers read
     * nothing else of the span for it); the rest is the turn check's. No driver call. */
    if (pcl_vote_chunks_held(x->chunk, x->nchunk, chunk, id->nalloc))
      sd->held |= 1ull << s;
    else
      *stale |= 1ull << s;
  }
  return 1;
}

/* The turn check: the next PCL_AUTO_SCAN_CHUNKS allocations of the slot under the cursor against
 * what it exchanged; 1 << slot when they changed (the cursor then moves to the next slot). */
static uint64_t scan_step(struct pcl_comm_auto *t) {
  struct pcl_auto_alloc *x = NULL;
  for (int k = 0; k <= PCL_VOTE_SLOTS && x == NULL; k++) {
    struct pcl_auto_alloc *c = &t->a[t->scan_slot];
    if (c->live && !c->dead && t->scan_chunk < c->nchunk)
      x = c;
    else {
      t->scan_slot = (t->scan_slot + 1) % PCL_VOTE_SLOTS;
      t->scan_chunk = 0;
    }
  }
  if (x == NULL)
    return 0;
  const int k = t->scan_chunk,
            m = x->nchunk - k < PCL_AUTO_SCAN_CHUNKS ? x->nchunk - k : PCL_AUTO_SCAN_CHUNKS;
  const pcl_mem_chunk_t *first = &x->chunk[k], *last = &x->chunk[k + m - 1];
  pcl_mem_identity_t id;
  const int same = pcl_mem_identity_chunks((const void *)(uintptr_t)first->base,
                                           last->base + last->size - first->base, &id, t->scan_buf,
                                           PCL_AUTO_SCAN_CHUNKS) == ncclSuccess &&
                   id.kind != 0 && id.nalloc == m && pcl_vote_chunks_held(first, m, t->scan_buf, m);
  const int s = t->scan_slot;
  t->scan_chunk += m;
  if (same)
    return 0;
  t->scan_chunk = x->nchunk; /* the slot goes: on to the next */
  return 1ull << s;
}

/* This rank's vote: its buffers against its table. */
pcl_vote_t pcl_auto_vote(struct pcl_comm_auto *t, const struct pcl_coll_args *a, uint64_t in_bytes,
                         uint64_t out_bytes, pcl_mem_identity_t id[2]) {
  pcl_vote_t v;
  memset(&v, 0, sizeof(v));
  v.kind = PCL_VOTE_AUTO;
  if (!side_vote(t, a->sendbuff, in_bytes, &id[0], t->call_chunk, &v.side[0], &v.stale) ||
      !side_vote(t, a->recvbuff, out_bytes, &id[1], t->call_chunk + PCL_MEM_MAX_CHUNKS, &v.side[1],
                 &v.stale)) {
    memset(&v, 0, sizeof(v)); /* PCL_VOTE_NO */
    return v;
  }
  const uint64_t o = v.side[1].ptr;
  v.out_in_span = o >= id[0].base && out_bytes <= id[0].end - id[0].base &&
                  o - id[0].base <= id[0].end - id[0].base - out_bytes;
  v.stale |= scan_step(t);
  return v;
}

/* Registers this rank's span of side k with every peer in a free slot (or the oldest one's,
 * never `keep`): alike on every rank, as every rank's table is. Collective; a failure of the
 * exchange fails alike everywhere (memchan.c) and is remembered in the slot, so later calls on
 * that memory run unregistered without retrying (a rank out of host memory before the exchange
 * leaves its peers to time out in the bootstrap, as elsewhere). */
int pcl_auto_exchange(struct pcl_comm_pcl *p, struct pcl_comm_auto *t, int k,
                      const pcl_mem_identity_t *id, int keep) {
  uint64_t live = 0;
  uint32_t gen[PCL_VOTE_SLOTS];
  for (int i = 0; i < PCL_VOTE_SLOTS; i++) {
    live |= (uint64_t)(t->a[i].live != 0) << i;
    gen[i] = t->a[i].gen;
  }
  const int s = pcl_vote_pick_slot(live, gen, keep);
  if (t->a[s].live)
    pcl_auto_slot_drop(t, s);
  struct pcl_auto_alloc *x = &t->a[s];
  x->live = 1;
  x->gen = t->next_gen++;
  x->base = id->base;
  x->bytes = id->end - id->base;
  /* Out of host memory: a slot no buffer matches, found stale and dropped alike later. */
  x->nchunk = PCL_CALLOC(x->chunk, (size_t)id->nalloc, "auto-registration chunks") ? id->nalloc : 0;
  if (x->nchunk > 0)
    memcpy(x->chunk, t->call_chunk + (size_t)k * PCL_MEM_MAX_CHUNKS,
           (size_t)x->nchunk * sizeof(pcl_mem_chunk_t));
  for (int r = 0; r < t->nranks; r++)
    x->span[r] = t->ledger.votes[r].side[k].span;
  t->exchanges++;
  ncclResult_t res = pcl_exec_window_create(p->exec, (void *)(uintptr_t)x->base, x->bytes, &x->w);
  if (res != ncclSuccess) {
    x->w = NULL;
    PCL_WARN(PCL_LOG_SHIM,
             "rank %d: allocation %p +%llu could not be registered (%s): calls on it run "
             "unregistered",
             p->rank, (void *)(uintptr_t)x->base, (unsigned long long)x->bytes,
             ncclGetErrorString(res));
    return s;
  }
  if (cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming) != cudaSuccess)
    x->done = NULL;
  PCL_INFO(PCL_LOG_SHIM, "rank %d: allocation %p +%llu registered automatically (slot %d, gen %u)",
           p->rank, (void *)(uintptr_t)x->base, (unsigned long long)x->bytes, s, x->gen);
  return s;
}

/* A digest of a view's identity (slots' generations, sizes, every rank's offsets), so that the
 * search through many views compares one word each. */
static uint64_t view_key(uint32_t g0, uint32_t g1, const uint64_t bytes[2], const uint64_t *off,
                         int n) {
  uint64_t h = ((uint64_t)g0 << 32 | g1) * 0x9e3779b97f4a7c15ull;
  h = (h ^ bytes[0] ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ bytes[1] ^ (h >> 31)) * 0x94d049bb133111ebull;
  for (int i = 0; i < n; i++)
    h = (h ^ off[i] ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

/* The view of this round's buffers in slots si and so: each rank's at its own offset, from the
 * round's votes. Found again when the same buffers come back; made locally otherwise. NULL in
 * *ub, alike on every rank, when a slot's exchange failed. An error only where this rank alone
 * cannot follow the agreement (out of host memory; a view the votes say fits and does not): its
 * peers run the call registered and time out waiting for it, so the call fails here, loudly. */
ncclResult_t pcl_auto_view_get(struct pcl_comm_pcl *p, struct pcl_comm_auto *t, int si, int so,
                               uint64_t in_bytes, uint64_t out_bytes, pcl_exec_userbuf_t **ub) {
  const int n = t->nranks, slot[2] = {si, so};
  const uint64_t bytes[2] = {in_bytes, out_bytes};
  uint64_t off[2 * PCL_VOTE_MAX_RANKS];
  ncclResult_t res;
  *ub = NULL;
  if (t->a[si].w == NULL || t->a[so].w == NULL)
    return ncclSuccess;
  for (int k = 0; k < 2; k++)
    for (int r = 0; r < n; r++)
      off[k * n + r] = t->ledger.votes[r].side[k].ptr - t->a[slot[k]].span[r];
  const uint64_t key = view_key(t->a[si].gen, t->a[so].gen, bytes, off, 2 * n);
  t->tick++;
  for (int i = 0; i < t->nview; i++) {
    struct pcl_auto_view *x = &t->v[i];
    if (t->vkey[i] == key && x->gen[0] == t->a[si].gen && x->gen[1] == t->a[so].gen &&
        x->bytes[0] == in_bytes && x->bytes[1] == out_bytes &&
        memcmp(x->off, off, 2 * (size_t)n * sizeof(uint64_t)) == 0) {
      x->tick = t->tick;
      *ub = x->ub;
      return ncclSuccess;
    }
  }
  if (t->nview == PCL_AUTO_VIEWS) {
    int old = 0;
    for (int i = 1; i < t->nview; i++)
      old = t->v[i].tick < t->v[old].tick ? i : old;
    view_drop(t, old);
  }
  struct pcl_auto_view *x = &t->v[t->nview];
  memset(x, 0, sizeof(*x));
  if (PCL_CALLOC(x->off, 2 * (size_t)n, "auto-registration view") == NULL)
    return ncclSystemError;
  PCL_CHECK_GOTO(pcl_exec_userbuf_view_at(p->exec, t->a[si].w, off, in_bytes, t->a[so].w, off + n,
                                          out_bytes, &x->ub),
                 res, fail);
  memcpy(x->off, off, 2 * (size_t)n * sizeof(uint64_t));
  t->vkey[t->nview] = key;
  for (int k = 0; k < 2; k++) {
    x->gen[k] = t->a[slot[k]].gen;
    x->bytes[k] = bytes[k];
  }
  x->tick = t->tick;
  t->nview++;
  t->views++;
  *ub = x->ub;
  return ncclSuccess;
fail:
  pcl_free(x->off);
  x->off = NULL;
  return res;
}
