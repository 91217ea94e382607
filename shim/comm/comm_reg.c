/* SPDX-License-Identifier: MIT
 * planccl's side of ncclCommRegister: the ranges a rank registered (locally, as NCCL does), and
 * the call buffers inside them exchanged with the peers at their first planned call whose path
 * registration changes (a zero-copy plan, or a tuning entry for registered buffers), then kept.
 * Correct under NCCL's contract for registered buffers: every rank registers and passes matching
 * buffers in the same order. */
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_int.h"
#include "exec.h"
#include "log.h"
#include "pcl_check.h"

/* Bounded and never evicted: a CUDA graph may hold a pair's program; the tables fill alike on
 * every rank under the contract above. */
#define PCL_RANGES_MAX 256
#define PCL_PAIRS_MAX 256

/* What the caller holds: planccl's handle, naming one registration. */
struct pcl_reg_handle {
  void *real; /* the real NCCL's handle */
};

struct pcl_range {
  struct pcl_reg_handle *h;
  uintptr_t base;
  size_t bytes;
};

struct pcl_pair {
  const void *in;
  const void *out;
  uint64_t in_bytes, out_bytes;
  pcl_exec_userbuf_t *ub; /* NULL: its exchange failed (on every rank alike): not retried */
};

struct pcl_comm_regs {
  struct pcl_range range[PCL_RANGES_MAX];
  int nrange;
  struct pcl_pair pair[PCL_PAIRS_MAX];
  int npair;
};

void pcl_comm_reg_add(struct pcl_comm_pcl *p, void *buff, size_t size, void **handle) {
  struct pcl_reg_handle *h = NULL;
  if (p->regs == NULL)
    PCL_CALLOC(p->regs, 1, "comm registrations");
  struct pcl_comm_regs *t = p->regs;
  if (t == NULL || t->nrange == PCL_RANGES_MAX || buff == NULL || size == 0 ||
      PCL_CALLOC(h, 1, "registration handle") == NULL) {
    PCL_INFO(PCL_LOG_SHIM, "rank %d: registration %p +%zu is NCCL's only (%d kept)", p->rank, buff,
             size, t != NULL ? t->nrange : 0);
    return;
  }
  h->real = *handle;
  t->range[t->nrange++] = (struct pcl_range){h, (uintptr_t)buff, size};
  *handle = h;
}

static int inside(const struct pcl_range *r, const void *ptr, uint64_t bytes) {
  const uintptr_t a = (uintptr_t)ptr;
  return a >= r->base && bytes <= r->bytes && a - r->base <= r->bytes - bytes;
}

void *pcl_comm_reg_remove(struct pcl_comm_pcl *p, void *handle) {
  struct pcl_comm_regs *t = p->regs;
  int i = 0;
  while (t != NULL && i < t->nrange && (void *)t->range[i].h != handle)
    i++;
  if (t == NULL || i == t->nrange)
    return handle; /* NCCL's own */
  void *real = t->range[i].h->real;
  /* The pairs with a buffer inside it go too: the memory may be freed next. */
  for (int k = 0; k < t->npair; k++) {
    const struct pcl_pair *x = &t->pair[k];
    if (!inside(&t->range[i], x->in, x->in_bytes) && !inside(&t->range[i], x->out, x->out_bytes))
      continue;
    pcl_exec_userbuf_destroy(x->ub);
    t->pair[k--] = t->pair[--t->npair];
  }
  pcl_free(t->range[i].h);
  t->range[i] = t->range[--t->nrange];
  return real;
}

void pcl_comm_regs_destroy(struct pcl_comm_pcl *p) {
  struct pcl_comm_regs *t = p->regs;
  if (t == NULL)
    return;
  for (int k = 0; k < t->npair; k++)
    pcl_exec_userbuf_destroy(t->pair[k].ub);
  /* Handles still held by the caller die with the communicator, as NCCL's do. */
  for (int i = 0; i < t->nrange; i++)
    pcl_free(t->range[i].h);
  pcl_free(t);
  p->regs = NULL;
}

static int registered(const struct pcl_comm_regs *t, const void *ptr, uint64_t bytes) {
  for (int i = 0; i < t->nrange; i++)
    if (inside(&t->range[i], ptr, bytes))
      return 1;
  return 0;
}

pcl_exec_userbuf_t *pcl_comm_reg_find(struct pcl_comm_pcl *p, const struct pcl_coll_args *a,
                                      uint64_t in_bytes, uint64_t out_bytes, int *candidate) {
  const struct pcl_comm_regs *t = p->regs;
  *candidate = 0;
  if (t == NULL || t->nrange == 0)
    return NULL;
  for (int k = 0; k < t->npair; k++) {
    const struct pcl_pair *x = &t->pair[k];
    if (x->in == a->sendbuff && x->out == a->recvbuff && x->in_bytes == in_bytes &&
        x->out_bytes == out_bytes)
      return x->ub; /* NULL for a failed one, and no candidate either */
  }
  *candidate = t->npair < PCL_PAIRS_MAX && registered(t, a->sendbuff, in_bytes) &&
               registered(t, a->recvbuff, out_bytes);
  return NULL;
}

pcl_exec_userbuf_t *pcl_comm_reg_exchange(struct pcl_comm_pcl *p, const struct pcl_coll_args *a,
                                          uint64_t in_bytes, uint64_t out_bytes) {
  struct pcl_comm_regs *t = p->regs;
  pcl_exec_userbuf_t *ub = NULL;
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != p->cuda_dev)
    cudaSetDevice(p->cuda_dev);
  /* Collective: every rank is in this call and reached the same verdict. A failure fails alike
   * everywhere (memchan.c): the call then runs unregistered on every rank. */
  ncclResult_t res =
      pcl_exec_userbuf_create(p->exec, (void *)a->sendbuff, in_bytes, a->recvbuff, out_bytes, &ub);
  if (prev != p->cuda_dev && prev >= 0)
    cudaSetDevice(prev);
  if (res != ncclSuccess) /* remembered, so that later calls on the pair do not retry it */
    PCL_WARN(PCL_LOG_SHIM,
             "rank %d: registered buffers %p/%p could not be exchanged (%s): calls on them run "
             "as if unregistered",
             p->rank, a->sendbuff, a->recvbuff, ncclGetErrorString(res));
  t->pair[t->npair++] = (struct pcl_pair){a->sendbuff, a->recvbuff, in_bytes, out_bytes, ub};
  if (ub == NULL)
    return NULL;
  PCL_INFO(PCL_LOG_SHIM, "rank %d: registered buffers %p +%llu / %p +%llu exchanged (%d pairs)",
           p->rank, a->sendbuff, (unsigned long long)in_bytes, a->recvbuff,
           (unsigned long long)out_bytes, t->npair);
  return ub;
}
