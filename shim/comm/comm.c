/* SPDX-License-Identifier: MIT
 * Communicator lifecycle and the registry of live communicators: an open-addressing hash set of
 * pointers under one mutex, consulted at every API entry before a handle is dereferenced (through
 * a per-thread cache validated by a generation counter, so a hit takes no lock), and a graveyard
 * that delays the free of destroyed comms. */
#include "comm.h"

#include <string.h>
#include "alloc.h"
#include "log.h"
#include "shim_int.h"

#define GRAVEYARD_SLOTS 32
#define TOMBSTONE ((struct ncclComm *)1)

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm **table; /* NULL = empty, TOMBSTONE = deleted */
static size_t table_cap, table_used, table_live;
static struct ncclComm *graveyard[GRAVEYARD_SLOTS];
static int graveyard_next;

/* The lock-free hit path of pcl_comm_lookup.
 * reg_gen counts registrations removed: it is incremented (release) inside the reg_lock critical
 * section that takes a comm out of the table, and only there. A thread caches a handle together
 * with the generation it read UNDER reg_lock in the same critical section that found the handle
 * live; the entry is used only while reg_gen still equals that value. So a hit proves that no
 * comm left the registry between the locked lookup that filled the entry and the acquire load of
 * reg_gen on this call: the handle is still live.
 * Why this refuses a destroyed handle: if a destroy returned before this call began (the same
 * thread, or another thread ordered by any synchronisation, e.g. a join or a mutex), its
 * increment happens-before our load, and read coherence forbids reading an older value, so the
 * entry's generation is stale and we take the locked path, which refuses the handle. A destroy
 * racing with the call is an application bug that the locked path cannot catch either (the call
 * may win the lock first); the graveyard keeps the memory readable for that case.
 * The acquire load pairs with the release increment so that a reader that sees generation G also
 * sees the table state the remover published before G; on x86 both are plain moves.
 * Additions never bump the generation: only positive answers are cached, and an address reused
 * by a new comm was first removed (bump) when its previous comm was destroyed. The generation
 * starts at 1 so a zeroed entry (handle NULL, generation 0) never matches; NULL is refused before
 * the cache is read anyway. */
static _Atomic uint64_t reg_gen = 1;

#define TL_CACHE_SLOTS 8 /* direct-mapped: a thread driving several comms (-g N) keeps them all */
struct tl_entry {
  const struct ncclComm *handle;
  uint64_t gen;
};
static _Thread_local struct tl_entry tl_cache[TL_CACHE_SLOTS];

/* Caller holds reg_lock. */
static void gen_bump_locked(void) {
  atomic_fetch_add_explicit(&reg_gen, 1, memory_order_release);
}

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

/* Index of `p` in the table, or -1. Caller holds reg_lock. */
static long find_locked(const void *p) {
  if (table_cap == 0 || p == NULL)
    return -1;
  for (size_t i = hash_ptr(p, table_cap), n = 0; n < table_cap;
       i = (i + 1) & (table_cap - 1), n++) {
    if (table[i] == NULL)
      return -1;
    if (table[i] == p)
      return (long)i;
  }
  return -1;
}

static ncclResult_t insert_locked(struct ncclComm *c) {
  if ((table_used + 1) * 2 > table_cap) {
    size_t cap = table_cap ? table_cap * 2 : 64;
    while (table_live * 4 > cap)
      cap *= 2;
    struct ncclComm **t = pcl_calloc(cap, sizeof(*t), "comm registry");
    if (t == NULL)
      return ncclSystemError;
    for (size_t i = 0; i < table_cap; i++) {
      struct ncclComm *e = table[i];
      if (e == NULL || e == TOMBSTONE)
        continue;
      size_t j = hash_ptr(e, cap);
      while (t[j] != NULL)
        j = (j + 1) & (cap - 1);
      t[j] = e;
    }
    pcl_free(table);
    table = t;
    table_cap = cap;
    table_used = table_live;
  }
  size_t i = hash_ptr(c, table_cap);
  while (table[i] != NULL && table[i] != TOMBSTONE)
    i = (i + 1) & (table_cap - 1);
  if (table[i] == NULL)
    table_used++;
  table[i] = c;
  table_live++;
  return ncclSuccess;
}

ncclResult_t pcl_comm_create(int rank, int nranks, struct ncclComm *parent, struct ncclComm **out) {
  struct ncclComm *c;
  if (PCL_CALLOC(c, 1, "communicator") == NULL)
    return ncclSystemError;
  c->start_magic = PCL_COMM_START_MAGIC;
  c->end_magic = PCL_COMM_END_MAGIC;
  c->rank = rank;
  c->nranks = nranks;
  c->cuda_dev = c->local_rank = c->ranks_per_node = -1;
  c->parent = parent;
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_lock(&reg_lock);
  ncclResult_t res = insert_locked(c);
  pthread_mutex_unlock(&reg_lock);
  if (res != ncclSuccess) {
    pthread_mutex_destroy(&c->lock);
    pcl_free(c);
    return res;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t pcl_comm_destroy(struct ncclComm *c) {
  pthread_mutex_lock(&reg_lock);
  long i = find_locked(c);
  if (i < 0) {
    pthread_mutex_unlock(&reg_lock);
    return ncclInvalidArgument;
  }
  table[i] = TOMBSTONE;
  table_live--;
  gen_bump_locked(); /* every thread's cached entries are stale from here on */
  /* Children keep a pointer to their parent only for information; forget a dying parent. */
  for (size_t k = 0; k < table_cap; k++)
    if (table[k] != NULL && table[k] != TOMBSTONE && table[k]->parent == c)
      table[k]->parent = NULL;
  struct ncclComm *evicted = graveyard[graveyard_next];
  graveyard[graveyard_next] = c;
  graveyard_next = (graveyard_next + 1) % GRAVEYARD_SLOTS;
  if (table_live == 0) {
    pcl_free(table);
    table = NULL;
    table_cap = table_used = 0;
  }
  pthread_mutex_unlock(&reg_lock);

  pthread_mutex_lock(&c->lock);
  pcl_free(c->premul_ops);
  c->premul_ops = NULL;
  c->n_premul = c->cap_premul = 0;
  pthread_mutex_unlock(&c->lock);
  c->start_magic = c->end_magic = PCL_COMM_DEAD_MAGIC;
  __atomic_store_n(&c->real, NULL, __ATOMIC_RELEASE);
  if (evicted != NULL) {
    pthread_mutex_destroy(&evicted->lock);
    pcl_free(evicted);
  }
  return ncclSuccess;
}

static int magic_ok(const char *fn, ncclComm_t handle) {
  if (handle->start_magic != PCL_COMM_START_MAGIC || handle->end_magic != PCL_COMM_END_MAGIC) {
    PCL_WARN(PCL_LOG_SHIM, "%s: corrupted communicator %p (bad magic)", fn, (void *)handle);
    return 0;
  }
  return 1;
}

ncclResult_t pcl_comm_lookup(const char *fn, ncclComm_t handle, const void *caller,
                             struct ncclComm **c, ncclComm_t *real) {
  if (handle == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "%s: communicator is NULL", fn);
    return ncclInvalidArgument;
  }
  /* Hit: no lock, no shared write (the ordering argument is at reg_gen). */
  struct tl_entry *e = &tl_cache[hash_ptr(handle, TL_CACHE_SLOTS)];
  uint64_t gen = atomic_load_explicit(&reg_gen, memory_order_acquire);
  if (e->handle == handle && e->gen == gen) {
    if (!magic_ok(fn, handle))
      return ncclInvalidArgument;
    *c = handle;
    *real = pcl_comm_real(handle); /* read each time: a deferred real init fills it later */
    return ncclSuccess;
  }
  pthread_mutex_lock(&reg_lock);
  long i = find_locked(handle);
  if (i >= 0) {
    /* Read under the lock that found the handle live: no removal can interleave (see reg_gen). */
    e->handle = handle;
    e->gen = atomic_load_explicit(&reg_gen, memory_order_relaxed);
    pthread_mutex_unlock(&reg_lock);
    if (!magic_ok(fn, handle))
      return ncclInvalidArgument;
    *c = handle;
    *real = pcl_comm_real(handle);
    return ncclSuccess;
  }
  /* Not ours: accept it only as the real comm of one of ours (rare path, linear scan; never
   * cached: it is not a planccl handle). */
  for (size_t k = 0; k < table_cap; k++) {
    struct ncclComm *t = table[k];
    if (t != NULL && t != TOMBSTONE && pcl_comm_real(t) == handle) {
      pthread_mutex_unlock(&reg_lock);
      *c = NULL;
      *real = handle;
      return ncclSuccess;
    }
  }
  pthread_mutex_unlock(&reg_lock);
  if (pcl_fallback_called_by_real(caller)) {
    *c = NULL;
    *real = handle;
    return ncclSuccess;
  }
  PCL_WARN(PCL_LOG_SHIM, "%s: invalid communicator %p (destroyed, or not created by planccl)", fn,
           (void *)handle);
  return ncclInvalidArgument;
}

ncclResult_t pcl_comm_lookup_real(const char *fn, ncclComm_t handle, const void *caller,
                                  struct ncclComm **c, ncclComm_t *real) {
  ncclResult_t res = pcl_comm_lookup(fn, handle, caller, c, real);
  if (res != ncclSuccess)
    return res;
  if (*real == NULL) {
    PCL_WARN(PCL_LOG_SHIM,
             "%s: communicator %p has no real NCCL communicator (its init failed, or "
             "runs inside a group that has not ended yet)",
             fn, (void *)handle);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t pcl_comm_refuse_suspended(const char *fn, struct ncclComm *c) {
  if (c == NULL || !atomic_load_explicit(&c->suspended, memory_order_relaxed))
    return ncclSuccess;
  if (!__atomic_exchange_n(&c->suspended_warned, 1, __ATOMIC_RELAXED))
    PCL_WARN(PCL_LOG_SHIM,
             "%s: communicator %p is suspended (ncclCommSuspend): collectives and registrations "
             "on it are refused until ncclCommResume",
             fn, (void *)c);
  else
    PCL_INFO(PCL_LOG_SHIM, "%s: communicator %p is suspended; ncclInvalidUsage", fn, (void *)c);
  return ncclInvalidUsage;
}

void pcl_comm_learn_ranks(struct ncclComm *c) {
  if (c->rank >= 0 && c->nranks > 0)
    return;
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  ncclComm_t real = pcl_comm_real(c);
  if (F == NULL || real == NULL || F->ncclCommCount == NULL || F->ncclCommUserRank == NULL)
    return;
  int n = -1, r = -1;
  if (F->ncclCommCount(real, &n) != ncclSuccess || F->ncclCommUserRank(real, &r) != ncclSuccess)
    return;
  if (n > 0 && r >= 0 && r < n) {
    c->nranks = n;
    c->rank = r;
  }
}

ncclResult_t pcl_comm_premul_add(struct ncclComm *c, ncclRedOp_t op) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&c->lock);
  if (c->n_premul == c->cap_premul) {
    int cap = c->cap_premul ? c->cap_premul * 2 : 8;
    ncclRedOp_t *ops = pcl_realloc(c->premul_ops, (size_t)c->cap_premul, (size_t)cap, sizeof(*ops),
                                   "premulsum ops");
    if (ops == NULL) {
      res = ncclSystemError;
      goto out;
    }
    c->premul_ops = ops;
    c->cap_premul = cap;
  }
  c->premul_ops[c->n_premul++] = op;
out:
  pthread_mutex_unlock(&c->lock);
  return res;
}

int pcl_comm_premul_remove(struct ncclComm *c, ncclRedOp_t op) {
  int found = 0;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->n_premul; i++) {
    if (c->premul_ops[i] == op) {
      c->premul_ops[i] = c->premul_ops[--c->n_premul];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

int pcl_comm_premul_known(struct ncclComm *c, ncclRedOp_t op) {
  int found = 0;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->n_premul && !found; i++)
    found = c->premul_ops[i] == op;
  pthread_mutex_unlock(&c->lock);
  return found;
}

int pcl_comm_live_count(void) {
  pthread_mutex_lock(&reg_lock);
  int n = (int)table_live;
  pthread_mutex_unlock(&reg_lock);
  return n;
}
