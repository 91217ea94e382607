/* SPDX-License-Identifier: MIT
 * One __device__ handler per plan op (mscclpp.md §2.6, NVLS excluded). Data ops use every thread
 * of the block (16-byte vectors when all addresses allow, element/word tails otherwise); sync ops
 * use one thread per channel or semaphore id. The handlers never assume a __syncthreads between
 * ops beyond the ones they issue themselves: plans put `nop` where they need one. */
#ifndef PCL_EXEC_OPS_CUH
#define PCL_EXEC_OPS_CUH

#include <stdint.h>
#include "kernel_abi.h"
#include "packet.cuh"
#include "reduce.cuh"

#define PCL_KMAX_SIDE PCL_KABI_MAX_OP_REFS /* refs per op side the handlers accept */

/* Block-uniform call context, in shared memory. */
typedef struct {
  /* This block's program, unpacked in shared memory (kernel_abi.h, the packed program). */
  const pcl_kmemchan_t *mem;
  const pcl_kportchan_t *port;
  const pcl_kremote_t *remote;
  const pcl_kop_t *ops;
  const pcl_kref_t *refs;
  int nops;
  char *base[3];        /* INPUT, OUTPUT, SCRATCH (this call's scratch half applied) */
  uint64_t scratch_odd; /* local scratch half added on odd flags (port offsets) */
  pcl_kstate_t *state;
  int32_t *sems;
  uint32_t flag;
  uint32_t odd;
  uint32_t nranks;
  int redop;
  int pkt;
} pcl_kctx_t;

/* A resolved range: address (packet space for packet refs) and payload size. */
typedef struct {
  char *p;
  uint32_t size; /* payload bytes */
} pcl_kspan_t;

/* Iteration of a pipeline body (unit == 0: not pipelined). */
typedef struct {
  uint32_t off;
  uint32_t unit;
  uint32_t wrap;
} pcl_kiter_t;

static __device__ __forceinline__ int pcl_kref_is_scratch(const pcl_kctx_t *c,
                                                          const pcl_kref_t *r) {
  return r->kind == PCL_KBUF_SCRATCH ||
         (r->kind == PCL_KBUF_REMOTE && c->remote[r->slot].kind == PCL_KBUF_SCRATCH);
}

/* Payload offset and size of a ref in this iteration. */
static __device__ __forceinline__ void pcl_kref_range(const pcl_kctx_t *c, const pcl_kref_t *r,
                                                      pcl_kiter_t it, uint32_t *off,
                                                      uint32_t *size) {
  if (it.unit == 0) {
    *off = r->offset;
    *size = r->size;
    return;
  }
  uint32_t o = it.off;
  if (o >= r->size) {
    *off = r->offset;
    *size = 0;
    return;
  }
  *size = min(it.unit, r->size - o);
  if (it.wrap != 0 && pcl_kref_is_scratch(c, r))
    o %= it.wrap;
  *off = r->offset + o;
}

static __device__ __forceinline__ pcl_kspan_t pcl_kref_span(const pcl_kctx_t *c,
                                                            const pcl_kref_t *r, pcl_kiter_t it,
                                                            int pkt) {
  uint32_t off, size;
  pcl_kref_range(c, r, it, &off, &size);
  char *base;
  if (r->kind == PCL_KBUF_REMOTE) {
    const pcl_kremote_t *rm = &c->remote[r->slot];
    base = (char *)(uintptr_t)rm->ptr + (c->odd ? rm->odd_half : 0);
  } else {
    base = c->base[r->kind];
  }
  pcl_kspan_t s;
  s.p = base + (uint64_t)off * (pkt ? PCL_KABI_PKT_RATIO : 1);
  s.size = size;
  return s;
}

/* ---- plain copies ---- */
static __device__ __noinline__ void pcl_kcopy(char *dst, const char *src, uint32_t bytes) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  uint32_t done = 0;
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
    uint32_t nv = bytes / 16;
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)dst;
    for (uint32_t i = tid; i < nv; i += n)
      d[i] = s[i];
    done = nv * 16;
  }
  if ((((uintptr_t)dst | (uintptr_t)src | done) & 3u) == 0) {
    uint32_t nw = (bytes - done) / 4;
    const uint32_t *s = (const uint32_t *)(src + done);
    uint32_t *d = (uint32_t *)(dst + done);
    for (uint32_t i = tid; i < nw; i += n)
      d[i] = s[i];
    done += nw * 4;
  }
  for (uint32_t i = done + tid; i < bytes; i += n)
    dst[i] = src[i];
}

/* ---- plain reductions: dst[*] = src[0] op src[1] op ... ---- */
template <typename T, int OP>
static __device__ __noinline__ void pcl_kreduce(char *const *src, int nsrc, char *const *dst,
                                                int ndst, uint32_t bytes) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  uintptr_t mis = 0;
  for (int j = 0; j < nsrc; j++)
    mis |= (uintptr_t)src[j];
  for (int j = 0; j < ndst; j++)
    mis |= (uintptr_t)dst[j];
  uint32_t done = 0;
  if ((mis & 15u) == 0) {
    /* All addresses 16-byte aligned: vector path over whole 16-byte words. */
    uint32_t nv = bytes / 16;
    for (uint32_t i = tid; i < nv; i += n) {
      uint4 acc = ((const uint4 *)src[0])[i];
      for (int j = 1; j < nsrc; j++)
        acc = pcl_kred_w<T, OP, uint4>(acc, ((const uint4 *)src[j])[i]);
      for (int j = 0; j < ndst; j++)
        ((uint4 *)dst[j])[i] = acc;
    }
    done = nv * 16;
  }
  uint32_t ne = (bytes - done) / sizeof(T);
  for (uint32_t i = tid; i < ne; i += n) {
    uint32_t o = done + i * (uint32_t)sizeof(T);
    T acc = *(const T *)(src[0] + o);
    for (int j = 1; j < nsrc; j++)
      acc = pcl_kred<T, OP>(acc, *(const T *)(src[j] + o));
    for (int j = 0; j < ndst; j++)
      *(T *)(dst[j] + o) = acc;
  }
}

/* Plain payload words of packet ops: user buffers may be only 4- (or 1-) byte aligned. */
static __device__ __forceinline__ uint2 pcl_kld8(const char *p) {
  uintptr_t a = (uintptr_t)p;
  if ((a & 7u) == 0)
    return *(const uint2 *)p;
  if ((a & 3u) == 0)
    return make_uint2(((const uint32_t *)p)[0], ((const uint32_t *)p)[1]);
  uint2 v;
  char *d = (char *)&v;
  for (int i = 0; i < 8; i++)
    d[i] = p[i];
  return v;
}
static __device__ __forceinline__ void pcl_kst8(char *p, uint2 v) {
  uintptr_t a = (uintptr_t)p;
  if ((a & 7u) == 0) {
    *(uint2 *)p = v;
  } else if ((a & 3u) == 0) {
    ((uint32_t *)p)[0] = v.x;
    ((uint32_t *)p)[1] = v.y;
  } else {
    const char *s = (const char *)&v;
    for (int i = 0; i < 8; i++)
      p[i] = s[i];
  }
}
static __device__ __forceinline__ uint32_t pcl_kld4(const char *p) {
  if (((uintptr_t)p & 3u) == 0)
    return *(const uint32_t *)p;
  uint32_t v;
  char *d = (char *)&v;
  for (int i = 0; i < 4; i++)
    d[i] = p[i];
  return v;
}
static __device__ __forceinline__ void pcl_kst4(char *p, uint32_t v) {
  if (((uintptr_t)p & 3u) == 0) {
    *(uint32_t *)p = v;
    return;
  }
  const char *s = (const char *)&v;
  for (int i = 0; i < 4; i++)
    p[i] = s[i];
}

/* ---- packet reductions: dst[*] = src[0] op packets(src[1..]) ----
 * src[0] and dst[0 .. nplain) are plain (payload) addresses, the others packet addresses. */
template <typename T, int OP>
static __device__ __noinline__ void pcl_kreduce_ll16(char *const *src, int nsrc, char *const *dst,
                                                     int nplain, int ndst, uint32_t bytes,
                                                     uint32_t flag, pcl_kwatch_t *w) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  uint32_t np = bytes / 8;
  for (uint32_t i = tid; i < np; i += n) {
    uint2 acc = pcl_kld8(src[0] + (uint64_t)i * 8);
    for (int j = 1; j < nsrc; j++) {
      uint2 v = pcl_ll16_wait(src[j] + (uint64_t)i * 16, flag, w);
      acc = pcl_kred_w<T, OP, uint2>(acc, v);
    }
    for (int j = 0; j < nplain; j++)
      pcl_kst8(dst[j] + (uint64_t)i * 8, acc);
    for (int j = nplain; j < ndst; j++)
      pcl_ll16_store(dst[j] + (uint64_t)i * 16, acc, flag);
  }
}

template <typename T, int OP>
static __device__ __noinline__ void pcl_kreduce_ll8(char *const *src, int nsrc, char *const *dst,
                                                    int nplain, int ndst, uint32_t bytes,
                                                    uint32_t flag, pcl_kwatch_t *w) {
  if (sizeof(T) > 4)
    return; /* refused on the host: an LL8 payload holds no 8-byte element */
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  uint32_t np = bytes / 4;
  for (uint32_t i = tid; i < np; i += n) {
    uint32_t acc = pcl_kld4(src[0] + (uint64_t)i * 4);
    for (int j = 1; j < nsrc; j++) {
      uint32_t v = pcl_ll8_wait(src[j] + (uint64_t)i * 8, flag, w);
      acc = pcl_kred_w<T, OP, uint32_t>(acc, v);
    }
    for (int j = 0; j < nplain; j++)
      pcl_kst4(dst[j] + (uint64_t)i * 4, acc);
    for (int j = nplain; j < ndst; j++)
      pcl_ll8_store(dst[j] + (uint64_t)i * 8, acc, flag);
  }
}

/* ---- packet moves (dtype-independent) ---- */

/* Plain -> packets (cpkt; memory ppkt to peer scratch). */
static __device__ __noinline__ void pcl_kpack(char *dst, const char *src, uint32_t bytes,
                                              uint32_t flag, int pkt) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  if (pkt == PCL_KPKT_LL16) {
    for (uint32_t i = tid; i < bytes / 8; i += n)
      pcl_ll16_store(dst + (uint64_t)i * 16, pcl_kld8(src + (uint64_t)i * 8), flag);
  } else {
    for (uint32_t i = tid; i < bytes / 4; i += n)
      pcl_ll8_store(dst + (uint64_t)i * 8, pcl_kld4(src + (uint64_t)i * 4), flag);
  }
}

/* Packets -> plain (upkt), waiting for each packet's flag. */
static __device__ __noinline__ void pcl_kunpack(char *dst, const char *src, uint32_t bytes,
                                                uint32_t flag, int pkt, pcl_kwatch_t *w) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  if (pkt == PCL_KPKT_LL16) {
    for (uint32_t i = tid; i < bytes / 8; i += n)
      pcl_kst8(dst + (uint64_t)i * 8, pcl_ll16_wait(src + (uint64_t)i * 16, flag, w));
  } else {
    for (uint32_t i = tid; i < bytes / 4; i += n)
      pcl_kst4(dst + (uint64_t)i * 4, pcl_ll8_wait(src + (uint64_t)i * 8, flag, w));
  }
}

/* Packets -> packets (rppkt): wait for each local packet, re-emit it to every dst (ndst may be 0:
 * wait only, for the port variant). */
static __device__ __noinline__ void pcl_kforward(char *const *dst, int ndst, const char *src,
                                                 uint32_t bytes, uint32_t flag, int pkt,
                                                 pcl_kwatch_t *w) {
  const uint32_t tid = threadIdx.x, n = blockDim.x;
  if (pkt == PCL_KPKT_LL16) {
    for (uint32_t i = tid; i < bytes / 8; i += n) {
      uint2 v = pcl_ll16_wait(src + (uint64_t)i * 16, flag, w);
      for (int j = 0; j < ndst; j++)
        pcl_ll16_store(dst[j] + (uint64_t)i * 16, v, flag);
    }
  } else {
    for (uint32_t i = tid; i < bytes / 4; i += n) {
      uint32_t v = pcl_ll8_wait(src + (uint64_t)i * 8, flag, w);
      for (int j = 0; j < ndst; j++)
        pcl_ll8_store(dst[j] + (uint64_t)i * 8, v, flag);
    }
  }
}

/* ---- port channels: one thread per trigger ---- */

/* Waits until the proxy consumed position pos (for a SYNC trigger: everything before it is
 * complete at the destination). */
static __device__ __forceinline__ void pcl_kport_wait_pos(const pcl_kportchan_t *pc, uint64_t pos,
                                                          pcl_kwatch_t *w) {
  if (pos == UINT64_MAX)
    return;
  pcl_kwait_on(w, (const void *)pc->fifo.tail, (uint32_t)(pos + 1), PCL_KWAIT_FIFO);
  pcl_kwatch_begin(w);
  while (pcl_kload_acquire_sys((const uint64_t *)pc->fifo.tail) <= pos) {
    if (pcl_kwatch_tick(w))
      break;
  }
}

/* A full FIFO means a proxy that stopped taking triggers (a dead peer connection, a stuck
 * thread): the wait for room is watched like every other spin, so it ends with the timeout or
 * an abort, recorded as a FIFO wait, instead of spinning forever. UINT64_MAX: given up. */
static __device__ __forceinline__ uint64_t pcl_kport_push(const pcl_kctx_t *c,
                                                          const pcl_kportchan_t *pc, uint64_t w0,
                                                          uint64_t w1, pcl_kwatch_t *w) {
  uint64_t pos = pcl_fifo_reserve(pc->fifo);
  if (!pcl_fifo_has_room(pc->fifo, pos)) {
    pcl_kwait_on(w, (const void *)pc->fifo.tail, (uint32_t)(pos - pc->fifo.size + 1),
                 PCL_KWAIT_FIFO);
    pcl_kwatch_begin(w);
    while (!pcl_fifo_has_room(pc->fifo, pos))
      if (pcl_kwatch_tick(w))
        return UINT64_MAX;
  }
  pcl_fifo_commit(pc->fifo, pos, w0, w1);
  return pos;
}

/* Data trigger for src -> dst (payload ranges; pkt doubles offsets and sizes), OR-ed with the
 * extra type bits; SYNC waits for completion. Called by one thread. */
static __device__ __noinline__ void pcl_kport_put(const pcl_kctx_t *c, const pcl_kportchan_t *pc,
                                                  const pcl_kref_t *src, const pcl_kref_t *dst,
                                                  pcl_kiter_t it, int pkt, uint32_t type,
                                                  pcl_kwatch_t *w) {
  uint32_t soff, ssize, doff, dsize;
  pcl_kref_range(c, src, it, &soff, &ssize);
  pcl_kref_range(c, dst, it, &doff, &dsize);
  const uint32_t mul = pkt ? PCL_KABI_PKT_RATIO : 1;
  uint64_t so = (uint64_t)soff * mul, dof = (uint64_t)doff * mul;
  uint32_t smem = PCL_KABI_NO_MEM, dmem = PCL_KABI_NO_MEM;
  if (src->kind < PCL_KBUF_REMOTE) {
    smem = pc->src_mem[src->kind];
    if (src->kind == PCL_KBUF_SCRATCH && c->odd)
      so += c->scratch_odd;
  }
  if (dst->kind == PCL_KBUF_REMOTE) {
    const pcl_kremote_t *rm = &c->remote[dst->slot];
    dmem = rm->mem_id;
    if (c->odd)
      dof += rm->odd_half;
  }
  uint32_t size = min(ssize, dsize) * mul;
  if (size == 0 && !(type & (PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC)))
    return;
  if (size == 0)
    type &= ~PCL_FIFO_TYPE_DATA;
  uint64_t pos = pcl_kport_push(c, pc, pcl_fifo_w0(size, (uint32_t)so),
                                pcl_fifo_w1(type, smem, dmem, (uint32_t)dof, pc->chan_id), w);
  if (type & PCL_FIFO_TYPE_SYNC)
    pcl_kport_wait_pos(pc, pos, w);
}

/* ---- sync ops ---- */

static __device__ __noinline__ void pcl_kop_signal(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                   pcl_kwatch_t *w) {
  __syncthreads(); /* every thread's earlier stores precede the release below */
  uint32_t t = threadIdx.x;
  if (t < op->nids) {
    if (op->chan_type == PCL_KCHAN_PORT) {
      const pcl_kportchan_t *pc = &c->port[op->ids[t]];
      pcl_kport_push(c, pc, 0, pcl_fifo_w1(PCL_FIFO_TYPE_FLAG, 0, 0, 0, pc->chan_id), w);
    } else {
      const pcl_kmemchan_t *mc = &c->mem[op->ids[t]];
      if (op->type == PCL_KOP_SIGNAL)
        pcl_katomic_add_release_sys((uint64_t *)mc->remote_inbound, 1);
      else
        pcl_katomic_add_relaxed_sys((uint64_t *)mc->remote_inbound, 1);
    }
  }
}

static __device__ __noinline__ void pcl_kop_wait(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                 pcl_kwatch_t *w) {
  uint32_t t = threadIdx.x;
  if (t < op->nids) {
    uint64_t inb, exp;
    if (op->chan_type == PCL_KCHAN_PORT) {
      inb = c->port[op->ids[t]].local_inbound;
      exp = c->port[op->ids[t]].local_expected;
    } else {
      inb = c->mem[op->ids[t]].local_inbound;
      exp = c->mem[op->ids[t]].local_expected;
    }
    pcl_ksem_wait((uint64_t *)inb, (uint64_t *)exp, op->type == PCL_KOP_RLXWAIT, w);
  }
  __syncthreads(); /* the block sees what the waiting threads acquired */
}

static __device__ __noinline__ void pcl_kop_flush(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                  pcl_kwatch_t *w) {
  uint32_t t = threadIdx.x;
  if (t < op->nids && op->chan_type == PCL_KCHAN_PORT) {
    const pcl_kportchan_t *pc = &c->port[op->ids[t]];
    uint64_t pos =
        pcl_kport_push(c, pc, 0, pcl_fifo_w1(PCL_FIFO_TYPE_SYNC, 0, 0, 0, pc->chan_id), w);
    pcl_kport_wait_pos(pc, pos, w);
  }
  __syncthreads();
}

/* The spin hooks of the grid barrier for the interpreter's watchdog. */
static __device__ __forceinline__ void pcl_kspin_begin(pcl_kwatch_t *w) {
  pcl_kwatch_begin(w);
}
static __device__ __forceinline__ int pcl_kspin_tick(pcl_kwatch_t *w) {
  return pcl_kwatch_tick(w);
}

/* Grid barrier of n blocks on *b (protocol in kernel_abi.h), for either kernel's watchdog. */
template <typename WATCH>
static __device__ __forceinline__ void pcl_kgrid_barrier_t(pcl_kbarrier_t *b, uint32_t n,
                                                           WATCH *w) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile uint32_t *gen = &b->gen;
    uint32_t g = *gen;
    __threadfence();
    if (atomicAdd(&b->arrived, 1u) == n - 1) {
      atomicExch(&b->arrived, 0u);
      __threadfence();
      atomicAdd(&b->gen, 1u);
    } else {
      pcl_kwait_on(w, (const void *)gen, g, PCL_KWAIT_BARRIER);
      pcl_kspin_begin(w);
      while (*gen == g) {
        if (pcl_kspin_tick(w))
          break;
      }
    }
    __threadfence();
  }
  __syncthreads();
}

static __device__ __noinline__ void pcl_kgrid_barrier(pcl_kbarrier_t *b, uint32_t n,
                                                      pcl_kwatch_t *w) {
  pcl_kgrid_barrier_t(b, n, w);
}

static __device__ __forceinline__ void pcl_kop_barrier(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                       pcl_kwatch_t *w) {
  pcl_kgrid_barrier(&c->state->barrier[op->ids[0]], op->nblocks, w);
}

/* sem_acquire / sem_release on the plan's semaphores, with either kernel's spin watchdog. */
template <typename WATCH>
static __device__ __forceinline__ void pcl_ksem_op_t(const pcl_kop_t *op, int32_t *sems, WATCH *w) {
  uint32_t t = threadIdx.x;
  if (op->type == PCL_KOP_SEM_RELEASE) {
    __syncthreads();
    if (t < op->nids) {
      __threadfence();
      atomicAdd(&sems[op->ids[t]], 1);
    }
    return;
  }
  if (t < op->nids) {
    int32_t *s = &sems[op->ids[t]];
    pcl_kwait_on(w, s, 1u, PCL_KWAIT_SEM);
    pcl_kspin_begin(w);
    for (;;) {
      int32_t v = *(volatile int32_t *)s;
      if (v > 0 && atomicCAS(s, v, v - 1) == v)
        break;
      if (pcl_kspin_tick(w))
        break;
    }
    __threadfence();
  }
  __syncthreads();
}

static __device__ __noinline__ void pcl_kop_sem(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                pcl_kwatch_t *w) {
  pcl_ksem_op_t(op, c->sems, w);
}

/* ---- data-movement ops (no dtype) ---- */

static __device__ __noinline__ void pcl_kop_move(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                 pcl_kiter_t it, pcl_kwatch_t *w) {
  const pcl_kref_t *src = &c->refs[op->ref_first];
  const pcl_kref_t *dst = src + op->nsrc;
  const int pkt = c->pkt;
  const int port = op->chan_type == PCL_KCHAN_PORT;
  switch (op->type) {
  case PCL_KOP_COPY:
  case PCL_KOP_PUT:
  case PCL_KOP_GET:
  case PCL_KOP_PWS:
  case PCL_KOP_PWSF:
    if (port) {
      uint32_t type = PCL_FIFO_TYPE_DATA;
      if (op->type != PCL_KOP_PUT)
        type |= PCL_FIFO_TYPE_FLAG;
      if (op->type == PCL_KOP_PWSF)
        type |= PCL_FIFO_TYPE_SYNC;
      __syncthreads(); /* the data this block wrote precedes the trigger's release store */
      for (uint32_t j = threadIdx.x; j < op->ndst && j < op->nids; j += blockDim.x)
        pcl_kport_put(c, &c->port[op->ids[j]], &src[min((int)j, op->nsrc - 1)], &dst[j], it, 0,
                      type, w);
      if (op->type == PCL_KOP_PWSF)
        __syncthreads();
      break;
    }
    /* Memory channel / local copy: pairwise, src[min(j, nsrc-1)] -> dst[min(j, ndst-1)] for
     * j over the remote side (GET: the sources, otherwise the destinations). */
    for (int j = 0; j < (op->type == PCL_KOP_GET ? op->nsrc : op->ndst); j++) {
      pcl_kspan_t s = pcl_kref_span(c, &src[min(j, op->nsrc - 1)], it, 0);
      pcl_kspan_t d = pcl_kref_span(c, &dst[min(j, op->ndst - 1)], it, 0);
      pcl_kcopy(d.p, s.p, min(s.size, d.size));
    }
    break;
  case PCL_KOP_CPKT: { /* src[0] plain -> dst[0] packets */
    if (op->nsrc < 1 || op->ndst < 1)
      break;
    pcl_kspan_t s = pcl_kref_span(c, &src[0], it, 0);
    pcl_kspan_t d = pcl_kref_span(c, &dst[0], it, 1);
    pcl_kpack(d.p, s.p, min(s.size, d.size), c->flag, pkt);
    break;
  }
  case PCL_KOP_UPKT: { /* src[0] packets -> dst[0] plain */
    if (op->nsrc < 1 || op->ndst < 1)
      break;
    pcl_kspan_t s = pcl_kref_span(c, &src[0], it, 1);
    pcl_kspan_t d = pcl_kref_span(c, &dst[0], it, 0);
    pcl_kunpack(d.p, s.p, min(s.size, d.size), c->flag, pkt, w);
    break;
  }
  case PCL_KOP_PPKT:
    if (port) {
      /* Both sides scratch: ship the already-packetised local region. */
      __syncthreads();
      for (uint32_t j = threadIdx.x; j < op->ndst && j < op->nids; j += blockDim.x)
        pcl_kport_put(c, &c->port[op->ids[j]], &src[min((int)j, op->nsrc - 1)], &dst[j], it, 1,
                      PCL_FIFO_TYPE_DATA, w);
      break;
    }
    for (int j = 0; j < op->ndst; j++) {
      pcl_kspan_t s = pcl_kref_span(c, &src[min(j, op->nsrc - 1)], it, 0);
      pcl_kspan_t d = pcl_kref_span(c, &dst[j], it, 1);
      pcl_kpack(d.p, s.p, min(s.size, d.size), c->flag, pkt);
    }
    break;
  case PCL_KOP_RPPKT: {
    pcl_kspan_t s = pcl_kref_span(c, &src[0], it, 1);
    if (port) {
      pcl_kforward(NULL, 0, s.p, s.size, c->flag, pkt, w);
      __syncthreads();
      for (uint32_t j = threadIdx.x; j < op->ndst && j < op->nids; j += blockDim.x)
        pcl_kport_put(c, &c->port[op->ids[j]], &src[0], &dst[j], it, 1, PCL_FIFO_TYPE_DATA, w);
      break;
    }
    char *d[PCL_KMAX_SIDE];
    int nd = 0;
    for (int j = 0; j < op->ndst && nd < PCL_KMAX_SIDE; j++)
      d[nd++] = pcl_kref_span(c, &dst[j], it, 1).p;
    pcl_kforward(d, nd, s.p, s.size, c->flag, pkt, w);
    break;
  }
  default:
    break;
  }
}

/* ---- reduce ops (dtype x op), including the packet ones ---- */
template <typename T, int OP>
static __device__ __noinline__ void pcl_kop_reduce_op(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                      pcl_kiter_t it, pcl_kwatch_t *w) {
  const pcl_kref_t *src = &c->refs[op->ref_first];
  const pcl_kref_t *dst = src + op->nsrc;
  char *s[PCL_KMAX_SIDE], *d[PCL_KMAX_SIDE];
  int ns = min((int)op->nsrc, PCL_KMAX_SIDE), nd = min((int)op->ndst, PCL_KMAX_SIDE);
  uint32_t bytes = 0xffffffffu;
  const int is_pkt = op->type >= PCL_KOP_REPKT;
  const int port = op->chan_type == PCL_KCHAN_PORT;
  /* Port RECSPKT: dst[2..] are sent by the proxy from the local packet copy dst[1]. */
  const int nd_local = (port && op->type == PCL_KOP_RECSPKT) ? min(nd, 2) : nd;
  for (int j = 0; j < ns; j++) {
    pcl_kspan_t sp = pcl_kref_span(c, &src[j], it, is_pkt && j > 0);
    s[j] = sp.p;
    bytes = min(bytes, sp.size);
  }
  /* REPKT writes plain results only; the other packet reductions write packets to dst[1..]. */
  const int nplain = op->type == PCL_KOP_REPKT ? nd_local : min(nd_local, 1);
  for (int j = 0; j < nd_local; j++) {
    pcl_kspan_t sp = pcl_kref_span(c, &dst[j], it, is_pkt && j >= nplain);
    d[j] = sp.p;
    bytes = min(bytes, sp.size);
  }
  if (ns == 0 || bytes == 0xffffffffu)
    return;
  if (!is_pkt) {
    pcl_kreduce<T, OP>(s, ns, d, nd_local, bytes);
  } else if (c->pkt == PCL_KPKT_LL16) {
    pcl_kreduce_ll16<T, OP>(s, ns, d, nplain, nd_local, bytes, c->flag, w);
  } else {
    pcl_kreduce_ll8<T, OP>(s, ns, d, nplain, nd_local, bytes, c->flag, w);
  }
  if (nd_local < nd) {
    __syncthreads();
    for (uint32_t j = threadIdx.x; j + 2 < (uint32_t)nd && j < op->nids; j += blockDim.x)
      pcl_kport_put(c, &c->port[op->ids[j]], &dst[1], &dst[j + 2], it, 1, PCL_FIFO_TYPE_DATA, w);
  }
}

template <typename T>
static __device__ __forceinline__ void pcl_kop_reduce(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                      pcl_kiter_t it, pcl_kwatch_t *w) {
  /* The plan's reduce_op, else the call's; avg sums here and is scaled after the plan ran
   * (end of pcl_kexec), as the simulator defines it. */
  int r = op->redop == PCL_KOP_REDOP_CALL ? c->redop : op->redop;
  if (r == ncclAvg)
    r = ncclSum;
  switch (r) {
#define PCL_KREDOP(suffix, nccl)                                                                   \
  case nccl:                                                                                       \
    pcl_kop_reduce_op<T, nccl>(c, op, it, w);                                                      \
    break;
#include "types.def"
#undef PCL_KREDOP
  default:
    break;
  }
}

/* One op (not PIPELINE, which the interpreter loop unrolls). */
template <typename T>
static __device__ __forceinline__ void pcl_kop_exec(const pcl_kctx_t *c, const pcl_kop_t *op,
                                                    pcl_kiter_t it, pcl_kwatch_t *w) {
  switch (op->type) {
  case PCL_KOP_NOP:
    __syncthreads();
    break;
  case PCL_KOP_BARRIER:
    pcl_kop_barrier(c, op, w);
    break;
  case PCL_KOP_SIGNAL:
  case PCL_KOP_RLXSIGNAL:
    pcl_kop_signal(c, op, w);
    break;
  case PCL_KOP_WAIT:
  case PCL_KOP_RLXWAIT:
    pcl_kop_wait(c, op, w);
    break;
  case PCL_KOP_FLUSH:
    pcl_kop_flush(c, op, w);
    break;
  case PCL_KOP_SEM_ACQUIRE:
  case PCL_KOP_SEM_RELEASE:
    pcl_kop_sem(c, op, w);
    break;
  case PCL_KOP_RE:
  case PCL_KOP_RES:
  case PCL_KOP_RRE:
  case PCL_KOP_RRES:
  case PCL_KOP_REPKT:
  case PCL_KOP_RESPKT:
  case PCL_KOP_RECPKT:
  case PCL_KOP_RECSPKT:
    pcl_kop_reduce<T>(c, op, it, w);
    break;
  default:
    pcl_kop_move(c, op, it, w);
    break;
  }
}

#endif
