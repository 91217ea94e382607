/* SPDX-License-Identifier: MIT
 * The program table of one executor context (exec_progs.h): O(1) lookup by shape, a bound on
 * how many programs a communicator keeps, and the device arena their images are cut from, so
 * that a workload of many message sizes neither scans a list per call nor grows without end. */
#include "exec_progs.h"
#include <string.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "param.h"

static uint32_t hash_key(const pcl_plan_t *plan, uint64_t in, uint64_t out, int shift) {
  uint64_t h = (uint64_t)(uintptr_t)plan * 0x9e3779b97f4a7c15ull;
  h ^= in + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
  h ^= out * 0xc2b2ae3d27d4eb4full + (h << 6) + (h >> 2);
  h ^= (uint64_t)(uint32_t)shift * 0x165667b19e3779f9ull;
  h ^= h >> 31;
  return (uint32_t)(h ^ (h >> 29));
}

/* The one test of identity; the index only narrows the candidates. A program reads the
 * registration's buffers only when it addresses the user's buffers remotely or by port. */
static int matches(const prog_t *p, const pcl_plan_t *plan, uint64_t in, uint64_t out, int shift,
                   const pcl_exec_userbuf_t *ub) {
  return p->plan == plan && p->in_bytes == in && p->out_bytes == out && p->shift == shift &&
         (!(p->shape.remote_io || p->shape.port_io) || p->ub == ub);
}

static void index_put(pcl_exec_progs_t *t, int i) {
  const prog_t *p = &t->v[i];
  uint32_t h = hash_key(p->plan, p->in_bytes, p->out_bytes, p->shift) & t->mask;
  while (t->index[h] >= 0)
    h = (h + 1) & t->mask;
  t->index[h] = i;
}

/* Rebuilt whole after a removal or growth: both are rare (a miss, a drop). */
static void index_rebuild(pcl_exec_progs_t *t) {
  for (uint32_t h = 0; h <= t->mask; h++)
    t->index[h] = -1;
  for (int i = 0; i < t->n; i++)
    index_put(t, i);
}

ncclResult_t pcl_progs_init(pcl_exec_progs_t *t) {
  memset(t, 0, sizeof(*t));
  t->limit = (int)pcl_param_exec_programs();
  t->slack = t->limit / 8 > 16 ? t->limit / 8 : 16;
  PCL_CUDA_CHECK(cudaEventCreateWithFlags(&t->ev, cudaEventDisableTiming));
  return ncclSuccess;
}

static void push(pcl_progs_freed_t **list, int *n, int *capn, void *mem, int cls);

/* An image of its own (larger than any class: no shipped plan) is freed only with the context:
 * cudaFree may wait for the whole device, where ranks sharing the GPU spin on each other. */
static void image_release(pcl_exec_progs_t *t, void *mem, int cls) {
  if (cls < 0)
    push(&t->grave, &t->ngrave, &t->capgrave, mem, cls);
  else
    push(&t->free_list[cls], &t->nfree[cls], &t->capfree[cls], mem, cls);
}

/* Frees a list's images of their own (class blocks live in the chunks) and the list. */
static void free_images(pcl_progs_freed_t *l, int n) {
  for (int i = 0; i < n; i++)
    if (l[i].cls < 0)
      cudaFree(l[i].mem);
  pcl_free(l);
}

void pcl_progs_fini(pcl_exec_progs_t *t, int rank) {
  if (t->built > 0)
    PCL_INFO(PCL_LOG_EXEC,
             "rank %d: %llu programs built, %llu evicted, %llu of them rebuilt, at most %llu at "
             "once, %d MiB of device memory for their images (PLANCCL_EXEC_PROGRAMS %d, then "
             "%d more); a build took %.1f us on the host, %.1f of it issuing its copies",
             rank, (unsigned long long)t->built, (unsigned long long)t->evicted,
             (unsigned long long)t->rebuilt, (unsigned long long)t->peak,
             t->nchunks * (int)(PCL_PROGS_CHUNK >> 20), t->limit, t->slack,
             (double)t->build_ns / 1e3 / (double)t->built,
             (double)t->copy_ns / 1e3 / (double)t->built);
  for (int i = 0; i < t->n; i++)
    if (t->v[i].image_cls < 0)
      cudaFree(t->v[i].image);
  free_images(t->pend, t->npend);
  free_images(t->cover, t->ncover);
  free_images(t->grave, t->ngrave);
  for (int k = 0; k < PCL_PROGS_CLASSES; k++)
    free_images(t->free_list[k], t->nfree[k]);
  for (int i = 0; i < t->nchunks; i++)
    cudaFree(t->chunks[i]);
  pcl_free(t->chunks);
  pcl_free(t->index);
  pcl_free(t->seen);
  pcl_free(t->v);
  if (t->ev != NULL)
    cudaEventDestroy(t->ev);
  memset(t, 0, sizeof(*t));
}

prog_t *pcl_progs_find(pcl_exec_progs_t *t, const pcl_plan_t *plan, uint64_t in_bytes,
                       uint64_t out_bytes, int shift, const pcl_exec_userbuf_t *ub) {
  prog_t *p;
  if (t->last < t->n && matches(p = &t->v[t->last], plan, in_bytes, out_bytes, shift, ub)) {
    p->used = ++t->tick;
    return p;
  }
  if (t->n == 0)
    return NULL;
  for (uint32_t h = hash_key(plan, in_bytes, out_bytes, shift) & t->mask; t->index[h] >= 0;
       h = (h + 1) & t->mask) {
    p = &t->v[t->index[h]];
    if (matches(p, plan, in_bytes, out_bytes, shift, ub)) {
      t->last = t->index[h];
      p->used = ++t->tick;
      return p;
    }
  }
  return NULL;
}

static void push(pcl_progs_freed_t **list, int *n, int *capn, void *mem, int cls) {
  if (*n == *capn) {
    int cap = *capn ? 2 * *capn : 16;
    pcl_progs_freed_t *nl =
        pcl_realloc(*list, (size_t)*capn, (size_t)cap, sizeof(**list), "exec program images");
    if (nl == NULL)
      return; /* out of host memory: the block is lost until the context goes (never reused) */
    *list = nl;
    *capn = cap;
  }
  (*list)[(*n)++] = (pcl_progs_freed_t){mem, cls};
}

/* Images of removed programs wait for a launch after them (exec_progs.h); pinned ones may still
 * be replayed by a graph and are never reused: they stay allocated until the context goes. */
static void retire(pcl_exec_progs_t *t, const prog_t *p) {
  if (p->pinned)
    push(&t->grave, &t->ngrave, &t->capgrave, p->image, p->image_cls);
  else
    push(&t->pend, &t->npend, &t->cappend, p->image, p->image_cls);
}

/* Removes v[i], keeping v dense (the last one moves into its place). */
static void remove_at(pcl_exec_progs_t *t, int i) {
  if (!t->v[i].kept)
    t->newer--;
  retire(t, &t->v[i]);
  t->v[i] = t->v[--t->n];
  t->last = 0;
}

void pcl_progs_drop(pcl_exec_progs_t *t, int (*drop)(const prog_t *p, const void *arg),
                    const void *arg) {
  int removed = 0;
  for (int i = 0; i < t->n; i++)
    if (drop(&t->v[i], arg)) {
      remove_at(t, i--);
      removed = 1;
    }
  if (removed)
    index_rebuild(t);
}

/* Past limit + slack: the least recently used newer program that no capture holds goes. */
static void evict_one(pcl_exec_progs_t *t) {
  int victim = -1;
  for (int i = 0; i < t->n; i++) {
    const prog_t *p = &t->v[i];
    if (!p->kept && !p->pinned && (victim < 0 || p->used < t->v[victim].used))
      victim = i;
  }
  if (victim < 0)
    return; /* every newer program is in a graph: the table grows */
  const prog_t *v = &t->v[victim];
  const uint32_t h = hash_key(v->plan, v->in_bytes, v->out_bytes, v->shift);
  if (t->seen != NULL)
    t->seen[h & (PCL_PROGS_SEEN - 1)] = h | 1u;
  remove_at(t, victim);
  t->evicted++;
  index_rebuild(t);
}

ncclResult_t pcl_progs_reserve(pcl_exec_progs_t *t, prog_t **slot) {
  if (t->watching && t->newer >= t->slack)
    evict_one(t);
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 8;
    prog_t *nv = pcl_realloc(t->v, (size_t)t->cap, (size_t)cap, sizeof(prog_t), "exec programs");
    if (nv == NULL)
      return ncclSystemError;
    t->v = nv;
    t->cap = cap;
  }
  if (t->mask + 1 < 2u * (uint32_t)t->cap) {
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)t->cap)
      slots *= 2;
    int32_t *ni = pcl_calloc(slots, sizeof(int32_t), "exec program index");
    if (ni == NULL)
      return ncclSystemError;
    pcl_free(t->index);
    t->index = ni;
    t->mask = slots - 1;
    index_rebuild(t);
  }
  *slot = &t->v[t->n];
  memset(*slot, 0, sizeof(**slot));
  (*slot)->image_cls = -1;
  return ncclSuccess;
}

static int class_of(size_t bytes) {
  size_t sz = PCL_PROGS_MIN_CLASS;
  for (int k = 0; k < PCL_PROGS_CLASSES; k++, sz *= 2)
    if (bytes <= sz)
      return k;
  return -1;
}

ncclResult_t pcl_progs_image(pcl_exec_progs_t *t, prog_t *p, size_t bytes) {
  const int cls = class_of(bytes);
  if (cls < 0) {
    PCL_CUDA_CHECK(cudaMalloc(&p->image, bytes));
    p->image_cls = -1;
    return ncclSuccess;
  }
  if (t->nfree[cls] > 0) {
    p->image = t->free_list[cls][--t->nfree[cls]].mem;
    p->image_cls = cls;
    return ncclSuccess;
  }
  const uint64_t sz = (uint64_t)PCL_PROGS_MIN_CLASS << cls;
  if (t->nchunks == 0 || t->chunk_used + sz > PCL_PROGS_CHUNK) {
    if (t->nchunks == t->capchunks) {
      int cap = t->capchunks ? 2 * t->capchunks : 4;
      void **nc =
          pcl_realloc(t->chunks, (size_t)t->capchunks, (size_t)cap, sizeof(void *), "exec arena");
      if (nc == NULL)
        return ncclSystemError;
      t->chunks = nc;
      t->capchunks = cap;
    }
    void *chunk = NULL;
    PCL_CUDA_CHECK(cudaMalloc(&chunk, PCL_PROGS_CHUNK));
    t->chunks[t->nchunks++] = chunk;
    t->chunk_used = 0;
  }
  /* Classes are powers of two and chunks start aligned, so every block is aligned to its size
   * (up to the allocation's 256 bytes and more): the kernels' 16-byte loads hold. */
  const uint64_t off = (t->chunk_used + sz - 1) & ~(sz - 1);
  if (off + sz > PCL_PROGS_CHUNK) {
    t->chunk_used = PCL_PROGS_CHUNK; /* the next request starts a chunk */
    return pcl_progs_image(t, p, bytes);
  }
  p->image = (char *)t->chunks[t->nchunks - 1] + off;
  p->image_cls = cls;
  t->chunk_used = off + sz;
  return ncclSuccess;
}

void pcl_progs_commit(pcl_exec_progs_t *t, int rank) {
  prog_t *p = &t->v[t->n];
  p->used = ++t->tick;
  p->kept = !t->watching;
  if (!p->kept)
    t->newer++;
  t->last = t->n++;
  index_put(t, t->last);
  t->built++;
  if ((uint64_t)t->n > t->peak)
    t->peak = (uint64_t)t->n;
  if (t->watching && t->seen != NULL) {
    const uint32_t h = hash_key(p->plan, p->in_bytes, p->out_bytes, p->shift);
    uint32_t *slot = &t->seen[h & (PCL_PROGS_SEEN - 1)];
    if (*slot == (h | 1u)) {
      *slot = 0;
      t->rebuilt++;
      if (++t->rebuilds >= t->slack / 2 && t->slack < 64 * t->limit) {
        t->slack = 4 * t->slack < 64 * t->limit ? 4 * t->slack : 64 * t->limit;
        t->rebuilds = 0;
        PCL_INFO(PCL_LOG_EXEC,
                 "rank %d: calls cycle through more sizes than %d programs: the table now holds "
                 "up to %d more than PLANCCL_EXEC_PROGRAMS",
                 rank, t->n, t->slack);
      }
    }
  }
  if (!t->watching && t->n >= t->limit) {
    t->watching = 1;
    t->seen = pcl_calloc(PCL_PROGS_SEEN, sizeof(uint32_t), "exec evicted keys"); /* NULL: no
                                                                                     growth */
    PCL_INFO(PCL_LOG_EXEC,
             "rank %d: %d programs built (PLANCCL_EXEC_PROGRAMS): they stay; newer ones beyond "
             "%d more are evicted least recently used first, unless a graph captured them",
             rank, t->n, t->slack);
  }
}

void pcl_progs_abandon(pcl_exec_progs_t *t) {
  prog_t *p = &t->v[t->n];
  if (p->image != NULL)
    image_release(t, p->image, p->image_cls); /* never launched: reusable at once */
  p->image = NULL;
}

void pcl_progs_launched(pcl_exec_progs_t *t, prog_t *p, cudaStream_t stream, int captured) {
  if (captured) {
    if (t->watching && !p->kept)
      p->pinned = 1;
    return; /* an event recorded into a capture would not follow this launch */
  }
  if (t->ncover > 0 && cudaEventQuery(t->ev) == cudaSuccess) {
    for (int i = 0; i < t->ncover; i++)
      image_release(t, t->cover[i].mem, t->cover[i].cls);
    t->ncover = 0;
  }
  if (t->ncover == 0 && t->npend > 0 && cudaEventRecord(t->ev, stream) == cudaSuccess) {
    pcl_progs_freed_t *x = t->cover;
    int capx = t->capcover;
    t->cover = t->pend;
    t->capcover = t->cappend;
    t->ncover = t->npend;
    t->pend = x;
    t->cappend = capx;
    t->npend = 0;
  }
}
