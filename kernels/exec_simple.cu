/* SPDX-License-Identifier: MIT
 * The Simple kernel: one kernel per dtype for programs of plain (non-packet) ops over memory
 * channels: copies, puts, gets, reductions, signals, waits, barriers, semaphores and pipelines,
 * the shape of the Simple and zero-copy plans. Same ABI, program and results as the interpreter. */
#include <stdint.h>
#include "exec_end.cuh"
#include "exec_simple.h"

/* Why a kernel of its own: the interpreter paid about 1 us per op (its handlers are calls with a
 * stack, its watchdog lives in local memory, every ref is resolved again per op and iteration,
 * every wait reads its count from device memory), which the pipelined plans pay per op and per
 * 16 KiB unit; and its copies and reductions keep one 16-byte load in flight per thread. Here
 * every ref is resolved once per call into shared memory, the watchdog is in registers, every op
 * is inlined into one loop, and a thread issues the loads of PCL_KSIMPLE_UNROLL words, or of
 * every source of a reduction, before it stores any.
 * Both macros are build choices measured against each other on one H100 (docs/performance.md,
 * "Simple allreduce against hand-written kernels"): two words per thread with the helpers inlined
 * beat four words with them out of line (a call per copy and reduction), although inlining leaves
 * ptxas a few spills at 64 registers. Copies run pair after pair: loading a word of several copies
 * before storing any (batches, tried) kept the batch in local memory and cost more than it saved.
 */
#ifndef PCL_KSIMPLE_UNROLL
#define PCL_KSIMPLE_UNROLL 2
#endif
#ifndef PCL_KSIMPLE_HELPER
#define PCL_KSIMPLE_HELPER __forceinline__
#endif
#define PCL_KSIMPLE_GATHER 4 /* sources of a reduction whose words a thread loads at once */

/* The block's refs, resolved once per call (shared memory): address of the range's first byte
 * (this call's scratch half applied), payload size, and whether it is scratch (a pipeline's
 * scratch offsets wrap, pcl_kop_t.scratch_wrap). */
typedef struct {
  char *p[PCL_KABI_MAX_REFS];
  uint32_t size[PCL_KABI_MAX_REFS];
  uint8_t scratch[PCL_KABI_MAX_REFS];
} pcl_ksimple_refs_t;

/* A pipeline iteration: offset into every ref, bytes per iteration (0: not pipelined), wrap. */
typedef struct {
  uint32_t off, unit, wrap;
} pcl_ksimple_iter_t;

/* Ref t in iteration it (pcl_kref_range's rule): its address, and its size as the return. */
static __device__ __forceinline__ uint32_t pcl_ksimple_span(const pcl_ksimple_refs_t *r, int t,
                                                            pcl_ksimple_iter_t it, char **p) {
  const uint32_t size = r->size[t];
  *p = r->p[t];
  if (it.unit == 0)
    return size;
  if (it.off >= size)
    return 0;
  *p += it.wrap != 0 && r->scratch[t] ? it.off % it.wrap : it.off;
  return min(it.unit, size - it.off);
}

/* dst = src, bytes apart from the alignment the interpreter's pcl_kcopy needs for its vectors. */
static __device__ PCL_KSIMPLE_HELPER void pcl_ksimple_copy(char *dst, const char *src,
                                                           uint32_t bytes) {
  if ((((uintptr_t)dst | (uintptr_t)src) & 15u) != 0) {
    pcl_kcopy(dst, src, bytes);
    return;
  }
  const uint32_t n = blockDim.x, nv = bytes / 16u;
  const uint4 *s = (const uint4 *)src;
  uint4 *d = (uint4 *)dst;
  uint32_t i = threadIdx.x;
  for (; i + (PCL_KSIMPLE_UNROLL - 1) * n < nv; i += PCL_KSIMPLE_UNROLL * n) {
    uint4 v[PCL_KSIMPLE_UNROLL];
#pragma unroll
    for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
      v[u] = s[i + u * n];
#pragma unroll
    for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
      d[i + u * n] = v[u];
  }
  for (; i < nv; i += n)
    d[i] = s[i];
  if (nv * 16u < bytes)
    pcl_kcopy(dst + nv * 16u, src + nv * 16u, bytes - nv * 16u);
}

/* UNROLL 16-byte words at i, i + n, ...: acc = src[0] op src[1] op ... in source order (the
 * interpreter's order, so results match bit for bit). Loads are not waited for until their first
 * use, so the first two sources' loads are in flight together. Two sources per step (more
 * words in flight for the 4- and 8-rank reductions) made ptxas spill at 1024 threads. */
template <typename T, int OP>
static __device__ __forceinline__ void pcl_ksimple_reduce_trip(char *const *src, int ns,
                                                               char *const *dst, int nd, uint32_t i,
                                                               uint32_t n) {
  uint4 acc[PCL_KSIMPLE_UNROLL];
#pragma unroll
  for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
    acc[u] = ((const uint4 *)src[0])[i + u * n];
  for (int j = 1; j < ns; j++) {
    uint4 x[PCL_KSIMPLE_UNROLL];
#pragma unroll
    for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
      x[u] = ((const uint4 *)src[j])[i + u * n];
#pragma unroll
    for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
      acc[u] = pcl_kred_w<T, OP, uint4>(acc[u], x[u]);
  }
  for (int k = 0; k < nd; k++)
#pragma unroll
    for (int u = 0; u < PCL_KSIMPLE_UNROLL; u++)
      ((uint4 *)dst[k])[i + u * n] = acc[u];
}

/* Words [from, nv) of the reduction, one per thread and trip, every source's word loaded before
 * any is reduced (up to PCL_KSIMPLE_GATHER sources; the rest one after another): for slices of
 * a word or two per thread, where the trips above do not apply, this is one memory latency per
 * word instead of one per source. */
template <typename T, int OP>
static __device__ __forceinline__ void pcl_ksimple_reduce_words(char *const *src, int ns,
                                                                char *const *dst, int nd,
                                                                uint32_t from, uint32_t nv) {
  for (uint32_t i = from + threadIdx.x; i < nv; i += blockDim.x) {
    uint4 acc = ((const uint4 *)src[0])[i];
    /* Unrolled by PCL_KSIMPLE_GATHER: the next sources' loads issue before this word is reduced. */
#pragma unroll 4
    for (int j = 1; j < ns; j++)
      acc = pcl_kred_w<T, OP, uint4>(acc, ((const uint4 *)src[j])[i]);
    for (int k = 0; k < nd; k++)
      ((uint4 *)dst[k])[i] = acc;
  }
}

/* dst[*] = src[0] op src[1] op ...; unaligned operands and the bytes past the last word take the
 * interpreter's loops. In place (a dst equal to a source) is safe: a thread loads an element before
 * it stores it and no other thread touches that element. */
template <typename T, int OP>
static __device__ PCL_KSIMPLE_HELPER void pcl_ksimple_reduce(char **src, int ns, char **dst, int nd,
                                                             uint32_t bytes) {
  uintptr_t mis = 0;
  for (int j = 0; j < ns; j++)
    mis |= (uintptr_t)src[j];
  for (int j = 0; j < nd; j++)
    mis |= (uintptr_t)dst[j];
  if ((mis & 15u) != 0) {
    pcl_kreduce<T, OP>(src, ns, dst, nd, bytes);
    return;
  }
  const uint32_t n = blockDim.x, nv = bytes / 16u;
  const uint32_t whole = nv / (PCL_KSIMPLE_UNROLL * n) * (PCL_KSIMPLE_UNROLL * n);
  for (uint32_t i0 = 0; i0 < whole; i0 += PCL_KSIMPLE_UNROLL * n)
    pcl_ksimple_reduce_trip<T, OP>(src, ns, dst, nd, i0 + threadIdx.x, n);
  pcl_ksimple_reduce_words<T, OP>(src, ns, dst, nd, whole, nv);
  if (nv * 16u == bytes)
    return;
  const uint32_t done = nv * 16u;
  for (int j = 0; j < ns; j++)
    src[j] += done;
  for (int j = 0; j < nd; j++)
    dst[j] += done;
  pcl_kreduce<T, OP>(src, ns, dst, nd, bytes - done);
}

/* A wait on a memory channel (kernel_abi.h): the one waiter of the channel counts its expected
 * value up and spins (acquire, or relaxed for rlxwait) until the peer's signals reach it. The
 * count is the block's copy in shared memory (the kernel loads and stores it back once per call):
 * reading it from device memory put an L2 round trip before every wait. */
static __device__ __forceinline__ void
pcl_ksimple_wait(const pcl_kmemchan_t *mc, uint64_t *expected, int relaxed, pcl_kll_watch_t *w) {
  uint64_t *inbound = (uint64_t *)(uintptr_t)mc->local_inbound;
  const uint64_t e = *expected + 1;
  *expected = e;
  uint64_t v = relaxed ? pcl_kload_relaxed_sys(inbound) : pcl_kload_acquire_sys(inbound);
  if ((int64_t)(v - e) >= 0)
    return;
  pcl_kwait_on(w, inbound, (uint32_t)e, PCL_KWAIT_INBOUND);
  pcl_kspin_begin(w);
  do
    v = relaxed ? pcl_kload_relaxed_sys(inbound) : pcl_kload_acquire_sys(inbound);
  while ((int64_t)(v - e) < 0 && !pcl_kll_tick(w));
}

/* A plain reduction op (re, res, rre, rres): every destination gets the reduction of every
 * source, over the smallest of their ranges (pcl_kop_reduce_op). */
template <typename T>
static __device__ __forceinline__ void pcl_ksimple_reduce_op(const pcl_kop_t *op, int call_redop,
                                                             const pcl_ksimple_refs_t *r,
                                                             pcl_ksimple_iter_t it) {
  char *s[PCL_KMAX_SIDE], *d[PCL_KMAX_SIDE];
  const int ns = op->nsrc, nd = op->ndst, s0 = op->ref_first;
  uint32_t bytes = 0xffffffffu;
  for (int j = 0; j < ns; j++)
    bytes = min(bytes, pcl_ksimple_span(r, s0 + j, it, &s[j]));
  for (int j = 0; j < nd; j++)
    bytes = min(bytes, pcl_ksimple_span(r, s0 + ns + j, it, &d[j]));
  if (bytes == 0)
    return;
  switch (op->redop == PCL_KOP_REDOP_CALL ? call_redop : op->redop) {
  case ncclProd:
    pcl_ksimple_reduce<T, ncclProd>(s, ns, d, nd, bytes);
    break;
  case ncclMax:
    pcl_ksimple_reduce<T, ncclMax>(s, ns, d, nd, bytes);
    break;
  case ncclMin:
    pcl_ksimple_reduce<T, ncclMin>(s, ns, d, nd, bytes);
    break;
  default: /* sum, and avg (summed here, scaled at the kernel's end) */
    pcl_ksimple_reduce<T, ncclSum>(s, ns, d, nd, bytes);
  }
}

/* The block's per-call state the ops share (shared memory). */
typedef struct {
  pcl_ksimple_refs_t refs;
  uint64_t expected[PCL_KABI_MAX_MEMCHANS]; /* memory channels' wait counts (pcl_ksimple_wait) */
  uint8_t owner[PCL_KABI_MAX_MEMCHANS];     /* the first slot with the same counter */
} pcl_ksimple_block_t;

/* Runs one op (not a pipeline, which the kernel's loop runs). */
template <typename T>
static __device__ __forceinline__ void
pcl_ksimple_op(const pcl_kargs_t &a, const pcl_kmemchan_t *mem, const pcl_kop_t *op,
               pcl_ksimple_block_t *sb, pcl_ksimple_iter_t it, pcl_kll_watch_t *w) {
  const uint32_t t = threadIdx.x;
  switch (op->type) {
  case PCL_KOP_SIGNAL:
  case PCL_KOP_RLXSIGNAL:
    __syncthreads(); /* every thread's earlier stores precede the release below */
    if (t < op->nids) {
      uint64_t *to = (uint64_t *)(uintptr_t)mem[op->ids[t]].remote_inbound;
      if (op->type == PCL_KOP_SIGNAL)
        pcl_katomic_add_release_sys(to, 1);
      else
        pcl_katomic_add_relaxed_sys(to, 1);
    }
    return;
  case PCL_KOP_WAIT:
  case PCL_KOP_RLXWAIT:
    if (t < op->nids) {
      const int c = op->ids[t];
      pcl_ksimple_wait(&mem[c], &sb->expected[sb->owner[c]], op->type == PCL_KOP_RLXWAIT, w);
    }
    __syncthreads(); /* the block sees what the waiting threads acquired */
    return;
  case PCL_KOP_BARRIER:
    pcl_kgrid_barrier_t(&a.state->barrier[op->ids[0]], op->nblocks, w);
    return;
  case PCL_KOP_SEM_ACQUIRE:
  case PCL_KOP_SEM_RELEASE:
    pcl_ksem_op_t(op, a.sems, w);
    return;
  case PCL_KOP_COPY:
  case PCL_KOP_PUT:
  case PCL_KOP_GET: {
    /* Pair after pair, in order: a pair may read what an earlier one wrote. */
    const int s0 = op->ref_first, d0 = s0 + op->nsrc;
    const int pairs = op->type == PCL_KOP_GET ? op->nsrc : op->ndst;
    for (int j = 0; j < pairs; j++) {
      char *s, *d;
      const uint32_t ss = pcl_ksimple_span(&sb->refs, s0 + min(j, op->nsrc - 1), it, &s);
      const uint32_t ds = pcl_ksimple_span(&sb->refs, d0 + min(j, op->ndst - 1), it, &d);
      pcl_ksimple_copy(d, s, min(ss, ds));
    }
    return;
  }
  case PCL_KOP_RE:
  case PCL_KOP_RES:
  case PCL_KOP_RRE:
  case PCL_KOP_RRES:
    pcl_ksimple_reduce_op<T>(op, a.redop, &sb->refs, it);
    return;
  default: /* nop, and flush on a memory channel (nothing to wait for): a block barrier */
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(1024, 1) pcl_kexec_simple(const __grid_constant__ pcl_kargs_t a) {
  extern __shared__ uint4 pcl_ksmem[];
  __shared__ uint64_t flag64;
  __shared__ pcl_ksimple_block_t sb;
  PCL_KPROF_ENTRY;
  pcl_kstart(a, pcl_ksmem, &flag64);
  __syncthreads();
  const uint64_t f64 = flag64;
  const uint32_t odd = (uint32_t)f64 & 1u;
  const pcl_kblock_t *hdr = (const pcl_kblock_t *)pcl_ksmem;
  uint32_t off[5], bytes;
  pcl_kpack_offsets(hdr, off, &bytes);
  const char *base = (const char *)pcl_ksmem;
  const pcl_kmemchan_t *mem = (const pcl_kmemchan_t *)(base + off[0]);
  const pcl_kremote_t *remote = (const pcl_kremote_t *)(base + off[2]);
  const pcl_kop_t *ops = (const pcl_kop_t *)(base + off[3]);
  const pcl_kref_t *kref = (const pcl_kref_t *)(base + off[4]);
  const int nops = hdr->nops, nmem = hdr->nmem;
  for (uint32_t t = threadIdx.x; t < hdr->nrefs; t += blockDim.x) {
    const pcl_kref_t *k = &kref[t];
    uint32_t kind;
    char *b = pcl_kref_base(a, remote, k, odd, &kind);
    sb.refs.p[t] = b + k->offset;
    sb.refs.size[t] = k->size;
    sb.refs.scratch[t] = kind == PCL_KBUF_SCRATCH;
  }
  /* Slots naming one counter share one copy of it, counted by the first of them. */
  if (threadIdx.x < (uint32_t)nmem) {
    const int c = (int)threadIdx.x;
    int o = 0;
    while (mem[o].local_expected != mem[c].local_expected)
      o++;
    sb.owner[c] = (uint8_t)o;
    if (o == c)
      sb.expected[c] = *(const uint64_t *)(uintptr_t)mem[c].local_expected;
  }
  __syncthreads();
  PCL_KPROF_STAMP(prof_ready);
  pcl_kll_watch_t w = pcl_kll_watch_make(a, 0);
  int top = 0; /* top-level ops run (profiling) */
  for (int i = 0; i < nops; top++) {
    const pcl_kop_t *op = &ops[i];
    if (op->type == PCL_KOP_PIPELINE) {
      pcl_ksimple_iter_t it = {0, op->unit, op->scratch_wrap};
      const int first = i + 1, end = i + 1 + op->n_inner;
      for (uint32_t k = 0; k < op->n_iter; k++, it.off += op->unit)
        for (int j = first; j < end; j++) {
          w.op = (uint32_t)j;
          pcl_ksimple_op<T>(a, mem, &ops[j], &sb, it, &w);
        }
      i = end;
    } else {
      const pcl_ksimple_iter_t it = {0, 0, 0};
      w.op = (uint32_t)i;
      pcl_ksimple_op<T>(a, mem, op, &sb, it, &w);
      i++;
    }
#ifdef PCL_KPROF
    if (top < PCL_KABI_MAX_OPS)
      prof_op[top] = clock64();
#endif
  }
  (void)top;
  /* The counts back, for this block's next call (only the waiting threads changed them). */
  __syncthreads();
  if (threadIdx.x < (uint32_t)nmem && sb.owner[threadIdx.x] == threadIdx.x)
    *(uint64_t *)(uintptr_t)mem[threadIdx.x].local_expected = sb.expected[threadIdx.x];
  pcl_kexec_end<T>(a, f64, &w, false);
  PCL_KPROF_EXIT(top);
}

/* ---- the table, one row per dtype (types.def) ---- */
const pcl_ksimple_entry_t pcl_ksimple_table[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes) {nccl, pcl_kexec_simple<ctype>},
#include "types.def"
#undef PCL_KDTYPE
};
const int pcl_ksimple_table_n = (int)(sizeof(pcl_ksimple_table) / sizeof(pcl_ksimple_table[0]));
