/* SPDX-License-Identifier: MIT
 * The LL fast path: one kernel per dtype for programs made only of packet ops over memory channels
 * (cpkt, upkt, ppkt, rppkt, repkt, respkt, recpkt, recspkt) and nops, the shape of every shipped LL
 * plan. Same ABI, program, flag protocol and results as the interpreter (exec_ops.cuh), but a
 * short straight-line path: no calls, no stack, every ref resolved once per call, and all packet
 * sources of an element loaded before any is waited for. */
#ifndef PCL_EXEC_LL_CUH
#define PCL_EXEC_LL_CUH

#include <stdint.h>
#include "exec_ops.cuh"

#define PCL_KLL_MAXSRC PCL_KABI_LL_MAX_SRC /* packet sources one element waits for at once */

/* Spin state in registers (the interpreter's pcl_kwatch_t lives on the stack). */
typedef struct {
  const volatile uint32_t *abort_flag;
  uint32_t *error;
  uint64_t timeout_ns, start;
  uint32_t n, dead;
  /* For the hang report (pcl_kwait_on, packet.cuh); set on slow paths and per op only. */
  const void *prog, *at;
  uint32_t want, op, what;
} pcl_kll_watch_t;

static __device__ __forceinline__ pcl_kll_watch_t pcl_kll_watch_make(const pcl_kargs_t &a,
                                                                     uint32_t op) {
  pcl_kll_watch_t w = {a.abort_flag, a.error, a.timeout_ns, 0, 0, 0, a.blocks, NULL, 0, op, 0};
  return w;
}

/* The first source of qs[0 .. nqs) whose bit in `ok` is clear, as the packet of element i the
 * thread waits on (hang report). Unrolled selects: qs stays in registers. */
template <typename W, int MAX>
static __device__ __forceinline__ void pcl_kll_wait_on(pcl_kll_watch_t *w, const char *const *qs,
                                                       int nqs, uint32_t ok, uint32_t i,
                                                       uint32_t flag) {
  const char *at = NULL;
#pragma unroll
  for (int j = MAX - 1; j >= 0; j--)
    if (j < nqs && !(ok & (1u << j)) && qs[j] != NULL)
      at = qs[j];
  pcl_kwait_on(w, at + (uint64_t)i * (sizeof(W) * 2), flag,
               sizeof(W) == 8 ? PCL_KWAIT_LL16 : PCL_KWAIT_LL8);
}

/* Every 1024 failed polls: abort flag, error word (host-mapped, so rarely), timeout. Returns 1
 * when the thread gives up (the error is recorded; it goes on with garbage, as the interpreter). */
static __device__ __forceinline__ int pcl_kll_tick(pcl_kll_watch_t *w) {
  if ((++w->n & 1023u) != 0 && !w->dead)
    return 0;
  if (w->dead)
    return 1;
  uint32_t err = 0;
  if (*w->abort_flag != 0)
    err = PCL_KERR_ABORT;
  else if (*(volatile uint32_t *)w->error != 0)
    w->dead = 1;
  else if (w->timeout_ns != 0) {
    uint64_t now = pcl_kglobaltimer();
    if (w->start == 0)
      w->start = now;
    else if (now - w->start > w->timeout_ns)
      err = PCL_KERR_TIMEOUT;
  }
  if (err != 0) {
    if (atomicCAS((unsigned int *)w->error, 0u, err) == 0u)
      pcl_khang_record(w->error, err, w->prog, w->op, w->what, w->at, w->want,
                       w->start ? pcl_kglobaltimer() - w->start : 0);
    __threadfence_system();
    w->dead = 1;
  }
  return w->dead;
}

/* The spin hooks pcl_kgrid_barrier_t (exec_ops.cuh) needs, for the register watchdog. */
static __device__ __forceinline__ void pcl_kspin_begin(pcl_kll_watch_t *w) {
  w->start = 0;
  w->n = 0;
}
static __device__ __forceinline__ int pcl_kspin_tick(pcl_kll_watch_t *w) {
  return pcl_kll_tick(w);
}

/* Element i of a packet / plain buffer, for both packet formats (W = uint2: LL16, 8 payload
 * bytes per 16-byte packet; W = uint32_t: LL8, 4 per 8). */
static __device__ __forceinline__ int pcl_kll_rd(const char *q, uint32_t i, uint32_t flag,
                                                 uint2 *v) {
  return pcl_ll16_read(q + (uint64_t)i * 16, flag, v);
}
static __device__ __forceinline__ int pcl_kll_rd(const char *q, uint32_t i, uint32_t flag,
                                                 uint32_t *v) {
  return pcl_ll8_read(q + (uint64_t)i * 8, flag, v);
}
static __device__ __forceinline__ void pcl_kll_wr(char *q, uint32_t i, uint32_t flag, uint2 v) {
  pcl_ll16_store(q + (uint64_t)i * 16, v, flag);
}
static __device__ __forceinline__ void pcl_kll_wr(char *q, uint32_t i, uint32_t flag, uint32_t v) {
  pcl_ll8_store(q + (uint64_t)i * 8, v, flag);
}
static __device__ __forceinline__ void pcl_kll_ld(const char *p, uint32_t i, uint2 *v) {
  *v = pcl_kld8(p + (uint64_t)i * 8);
}
static __device__ __forceinline__ void pcl_kll_ld(const char *p, uint32_t i, uint32_t *v) {
  *v = pcl_kld4(p + (uint64_t)i * 4);
}
static __device__ __forceinline__ void pcl_kll_st(char *p, uint32_t i, uint2 v) {
  pcl_kst8(p + (uint64_t)i * 8, v);
}
static __device__ __forceinline__ void pcl_kll_st(char *p, uint32_t i, uint32_t v) {
  pcl_kst4(p + (uint64_t)i * 4, v);
}

/* Element i of every packet source into v[0..nqs): every load issued first (one memory latency
 * for all peers, not one per peer), then only the packets not yet carrying `flag` re-polled. */
template <typename W>
static __device__ __forceinline__ void pcl_kll_gather(char *const *qs, int nqs, uint32_t i,
                                                      uint32_t flag, W *v, pcl_kll_watch_t *w) {
  const uint32_t all = (1u << nqs) - 1u;
  uint32_t ok = 0;
#pragma unroll
  for (int j = 0; j < PCL_KLL_MAXSRC; j++)
    if (j < nqs) {
      W x;
      ok |= (uint32_t)pcl_kll_rd(qs[j], i, flag, &x) << j;
      v[j] = x;
    }
  if (ok == all)
    return;
  w->start = 0;
  w->n = 0;
  pcl_kll_wait_on<W, PCL_KLL_MAXSRC>(w, qs, nqs, ok, i, flag);
  do {
#pragma unroll
    for (int j = 0; j < PCL_KLL_MAXSRC; j++)
      if (j < nqs && !(ok & (1u << j))) {
        W x;
        ok |= (uint32_t)pcl_kll_rd(qs[j], i, flag, &x) << j;
        v[j] = x;
      }
  } while (ok != all && !pcl_kll_tick(w));
}

/* One pass over `bytes` payload bytes: acc = plain source (if any) or the first packet source,
 * then reduced in order with the remaining packet sources; written plain to pd[0..npd) and as
 * packets to qd[0..nqd). Plain pointers are at payload offsets, packet pointers at packet
 * offsets. OP is applied only between two sources or more. */
template <typename T, int OP, typename W>
static __device__ __forceinline__ void
pcl_kll_pass(const char *ps, char *const *qs, int nqs, char *const *pd, int npd, char *const *qd,
             int nqd, uint32_t bytes, uint32_t flag, pcl_kll_watch_t *w) {
  const uint32_t n = bytes / (uint32_t)sizeof(W);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    W v[PCL_KLL_MAXSRC];
    pcl_kll_gather<W>(qs, nqs, i, flag, v, w);
    W acc;
    int first = 0;
    if (ps != NULL) {
      pcl_kll_ld(ps, i, &acc);
    } else {
      acc = v[0];
      first = 1;
    }
#pragma unroll
    for (int j = 0; j < PCL_KLL_MAXSRC; j++)
      if (j >= first && j < nqs)
        acc = pcl_kred_w<T, OP, W>(acc, v[j]);
    for (int j = 0; j < npd; j++)
      pcl_kll_st(pd[j], i, acc);
    for (int j = 0; j < nqd; j++)
      pcl_kll_wr(qd[j], i, flag, acc);
  }
}

/* ppkt + repkt as one pass (PCL_KBLOCK_FUSED_PPKT_REPKT): per element, S loaded once, sent as
 * packets to every peer, then reduced with the peers' packets in repkt's source order into O.
 * Per element this is what the two ops do one after the other on the same thread. */
template <typename T, int OP, typename W>
static __device__ __forceinline__ void pcl_kll_fused(const char *s, char *const *qd, int k,
                                                     char *const *qs, char *o, uint32_t bytes,
                                                     uint32_t flag, pcl_kll_watch_t *w) {
  const uint32_t n = bytes / (uint32_t)sizeof(W);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    W acc;
    pcl_kll_ld(s, i, &acc);
    for (int j = 0; j < k; j++)
      pcl_kll_wr(qd[j], i, flag, acc);
    W v[PCL_KLL_MAXSRC];
    pcl_kll_gather<W>(qs, k, i, flag, v, w);
#pragma unroll
    for (int j = 0; j < PCL_KLL_MAXSRC; j++)
      if (j < k)
        acc = pcl_kred_w<T, OP, W>(acc, v[j]);
    pcl_kll_st(o, i, acc);
  }
}

/* Resolved refs of the block (shared memory): address at payload offset (plain) and at packet
 * offset (packet), and payload size; filled once per call, one thread per ref. */
typedef struct {
  char *plain[PCL_KABI_MAX_REFS];
  char *pkt[PCL_KABI_MAX_REFS];
  uint32_t size[PCL_KABI_MAX_REFS];
} pcl_kll_refs_t;

/* The packet moves (cpkt, ppkt, upkt, rppkt: one source per element, so no reduction and no
 * dtype), with the interpreter's operand rules (pcl_kop_move). */
template <typename W>
static __device__ __forceinline__ void pcl_kll_move(const pcl_kop_t *op, const pcl_kll_refs_t *r,
                                                    uint32_t flag, pcl_kll_watch_t *w) {
  const int s0 = op->ref_first, d0 = s0 + op->nsrc, ns = op->nsrc, nd = op->ndst;
  switch (op->type) {
  case PCL_KOP_CPKT:
  case PCL_KOP_PPKT: /* plain src[min(j, ns-1)] -> packets dst[j], pair by pair */
    for (int j = 0; j < (op->type == PCL_KOP_CPKT ? 1 : nd); j++) {
      int s = s0 + min(j, ns - 1), d = d0 + j;
      pcl_kll_pass<uint32_t, ncclSum, W>(r->plain[s], NULL, 0, NULL, 0, &r->pkt[d], 1,
                                         min(r->size[s], r->size[d]), flag, w);
    }
    break;
  case PCL_KOP_UPKT:
    pcl_kll_pass<uint32_t, ncclSum, W>(NULL, &r->pkt[s0], 1, &r->plain[d0], 1, NULL, 0,
                                       min(r->size[s0], r->size[d0]), flag, w);
    break;
  default: /* RPPKT */
    pcl_kll_pass<uint32_t, ncclSum, W>(NULL, &r->pkt[s0], 1, NULL, 0, &r->pkt[d0], nd, r->size[s0],
                                       flag, w);
  }
}

/* The packet reductions (pcl_kop_reduce_op): REPKT writes every dst plain; RESPKT, RECPKT and
 * RECSPKT write dst[0] plain and the rest as packets. */
template <typename T, int OP, typename W>
static __device__ __forceinline__ void pcl_kll_reduce(const pcl_kop_t *op, const pcl_kll_refs_t *r,
                                                      uint32_t flag, pcl_kll_watch_t *w) {
  const int s0 = op->ref_first, d0 = s0 + op->nsrc, ns = op->nsrc, nd = op->ndst;
  uint32_t bytes = 0xffffffffu;
  for (int j = 0; j < ns + nd; j++)
    bytes = min(bytes, r->size[s0 + j]);
  int npd = op->type == PCL_KOP_REPKT ? nd : min(nd, 1);
  pcl_kll_pass<T, OP, W>(r->plain[s0], &r->pkt[s0 + 1], ns - 1, &r->plain[d0], npd,
                         &r->pkt[d0 + npd], nd - npd, bytes, flag, w);
}

template <typename T, typename W>
static __device__ __forceinline__ void pcl_kll_fused_any(const pcl_kop_t *ops, int call_redop,
                                                         const pcl_kll_refs_t *r, uint32_t flag,
                                                         pcl_kll_watch_t *w) {
  const int p0 = ops[0].ref_first, k = ops[0].ndst, r0 = ops[1].ref_first;
  const char *s = r->plain[p0];
  char *const *qd = &r->pkt[p0 + 1];
  char *const *qs = &r->pkt[r0 + 1];
  char *o = r->plain[r0 + 1 + k];
  const uint32_t bytes = r->size[p0];
  int red = ops[1].redop == PCL_KOP_REDOP_CALL ? call_redop : ops[1].redop;
  switch (red) { /* avg sums here; the kernel scales at its end */
  case ncclProd:
    pcl_kll_fused<T, ncclProd, W>(s, qd, k, qs, o, bytes, flag, w);
    break;
  case ncclMax:
    pcl_kll_fused<T, ncclMax, W>(s, qd, k, qs, o, bytes, flag, w);
    break;
  case ncclMin:
    pcl_kll_fused<T, ncclMin, W>(s, qd, k, qs, o, bytes, flag, w);
    break;
  default:
    pcl_kll_fused<T, ncclSum, W>(s, qd, k, qs, o, bytes, flag, w);
  }
}

template <typename T, typename W>
static __device__ __forceinline__ void pcl_kll_op_any(const pcl_kop_t *op, int call_redop,
                                                      const pcl_kll_refs_t *r, uint32_t flag,
                                                      pcl_kll_watch_t *w) {
  if (op->type == PCL_KOP_CPKT || op->type == PCL_KOP_UPKT || op->type == PCL_KOP_PPKT ||
      op->type == PCL_KOP_RPPKT) {
    pcl_kll_move<W>(op, r, flag, w);
    return;
  }
  int red = op->redop == PCL_KOP_REDOP_CALL ? call_redop : op->redop;
  switch (red) { /* avg sums here; the kernel scales at its end */
  case ncclProd:
    pcl_kll_reduce<T, ncclProd, W>(op, r, flag, w);
    break;
  case ncclMax:
    pcl_kll_reduce<T, ncclMax, W>(op, r, flag, w);
    break;
  case ncclMin:
    pcl_kll_reduce<T, ncclMin, W>(op, r, flag, w);
    break;
  default:
    pcl_kll_reduce<T, ncclSum, W>(op, r, flag, w);
  }
}

#endif
