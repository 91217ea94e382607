/* SPDX-License-Identifier: MIT
 * The elementwise (EW) kernels: programs that executor/exec/exec_fuse.c proved run per element
 * (kernel_abi.h, pcl_kew_t), run as the hand-written one-phase LL kernels are written: the flag
 * slot and the block's descriptor loaded together at entry, no shared memory, one loop per phase,
 * and one kernel per (dtype, bound, reduction, packet type, alignment): no choice at run time. */
#include <stdint.h>
#include "exec_ew.h"
#include "exec_end.cuh"

/* Plain payload words of S and O. User buffers may be only element-aligned; AL says both are
 * aligned to the word, decided once per kernel (an element offset keeps the base's alignment),
 * so the aligned loops carry no per-word alignment test (pcl_kld8's three-way branch). */
template <bool AL, typename W>
static __device__ __forceinline__ void pcl_kew_ld(const char *p, uint32_t i, W *v) {
  if (AL)
    *v = ((const W *)p)[i];
  else
    pcl_kll_ld(p, i, v);
}
template <bool AL, typename W>
static __device__ __forceinline__ void pcl_kew_st(char *p, uint32_t i, W v) {
  if (AL)
    ((W *)p)[i] = v;
  else
    pcl_kll_st(p, i, v);
}

/* Element i of every term into x[0 .. nterm): S[i] where self has the bit, else the packet at
 * term[j] once it carries `flag`; all loads issued before any is re-polled. */
template <typename W, int NT, bool AL>
static __device__ __forceinline__ void pcl_kew_terms(const char *s, const char *const *term,
                                                     int nterm, uint32_t self, uint32_t i,
                                                     uint32_t flag, pcl_kll_watch_t *w, W *x) {
  const uint32_t all = (1u << nterm) - 1u;
  uint32_t ok = self;
  if (self != 0) {
    W v;
    pcl_kew_ld<AL>(s, i, &v);
#pragma unroll
    for (int j = 0; j < NT; j++)
      if (self & (1u << j))
        x[j] = v;
  }
#pragma unroll
  for (int j = 0; j < NT; j++)
    if (j < nterm && !(self & (1u << j)))
      ok |= (uint32_t)pcl_kll_rd(term[j], i, flag, &x[j]) << j;
  if (ok != all) {
    w->start = 0;
    w->n = 0;
    pcl_kll_wait_on<W, NT>(w, term, nterm, ok, i, flag);
    do {
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (j < nterm && !(ok & (1u << j)))
          ok |= (uint32_t)pcl_kll_rd(term[j], i, flag, &x[j]) << j;
    } while (ok != all && !pcl_kll_tick(w));
  }
}

template <typename T, int OP, typename W, int NT>
static __device__ __forceinline__ W pcl_kew_reduce(const W *x, int nterm) {
  W acc = x[0];
#pragma unroll
  for (int j = 1; j < NT; j++)
    if (j < nterm)
      acc = pcl_kred_w<T, OP, W>(acc, x[j]);
  return acc;
}

/* Two passes, as the hand-written kernels do: first every element's packets to every put, then
 * per element the terms gathered (all loads issued before any is re-polled), reduced left to
 * right in term order, and O stored. All of a thread's puts thus precede all of its waits, so
 * no plan can deadlock here however its ranks slice their elements (puts never block); the
 * ops' order is kept wherever it matters (exec_fuse.c). NT bounds nput and nterm. */
template <typename T, int OP, typename W, int NT, bool AL>
static __device__ __forceinline__ void
pcl_kew_loop(const char *s, char *const *put, int nput, const char *const *term, int nterm,
             uint32_t self, char *o, uint32_t n, uint32_t flag, pcl_kll_watch_t *w,
             uint64_t *prof_put) {
  if (nput > 0)
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
      W v;
      pcl_kew_ld<AL>(s, i, &v);
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (j < nput)
          pcl_kll_wr(put[j], i, flag, v);
    }
#ifdef PCL_KPROF
  *prof_put = clock64(); /* the puts' phase ends; the reduction's begins */
#else
  (void)prof_put;
#endif
  if (nterm == 0)
    return;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    W x[NT];
    pcl_kew_terms<W, NT, AL>(s, term, nterm, self, i, flag, w, x);
    pcl_kew_st<AL>(o, i, pcl_kew_reduce<T, OP, W, NT>(x, nterm));
  }
}

/* Every thread reads its block's flag slot itself (no shared memory, no barrier at entry), so
 * the block synchronises once before pcl_kexec_end stores the slots (exec_end.cuh). */
template <typename T, int NT, int OP, typename W, bool AL>
__global__ void __launch_bounds__(PCL_KABI_LL_MAX_THREADS, 1)
    pcl_kexec_ew(const __grid_constant__ pcl_kargs_t a) {
  static_assert(NT <= PCL_KEW_MAX, "the descriptor holds PCL_KEW_MAX entries");
  PCL_KPROF_ENTRY;
  const pcl_kew_t *d = (const pcl_kew_t *)a.blocks + blockIdx.x;
  /* The descriptor, in 16-byte units: [0] and [1] the header, [2 + j] put[j], [2 + PCL_KEW_MAX
   * + j] term[j]. Each warp loads the 2 + 2 * NT units it needs ONCE, one unit per lane (one
   * request per warp, not one per unit), and the lanes share them by shuffles; the loads do not
   * depend on the flag, so they overlap the slot's. Unused entries are loaded too (the
   * descriptor always holds PCL_KEW_MAX): loads predicated on nput/nterm would wait for the
   * header first. Needs whole warps (exec.c picks the EW kernels only then). The host wrote
   * the descriptor before the launch; the flag slot is the previous call's kernel's. Launched
   * with PDL, the slot is read after pcl_kdep_wait and the descriptor before; without, the slot
   * first and no wait, as in pcl_kstart (exec_kernel.cu). */
  const unsigned lane = threadIdx.x & 31u;
  const unsigned unit = lane < 2u + NT ? lane : lane - NT + PCL_KEW_MAX;
  const bool pdl = pcl_kpdl(a);
  const uint64_t *slot = &a.state->flag[blockIdx.x % PCL_KABI_FLAG_SLOTS];
  uint64_t f64 = 0;
  if (!pdl)
    f64 = *(volatile const uint64_t *)slot + 1;
  uint4 mine = make_uint4(0, 0, 0, 0);
  if (lane < 2u + 2u * NT)
    mine = ((const uint4 *)d)[unit];
  if (pdl) {
    pcl_kdep_wait();
    f64 = *(volatile const uint64_t *)slot + 1;
  }
  const uint32_t flag = pcl_kflag32(f64), odd = (uint32_t)f64 & 1u;
  const uint32_t bytes = __shfl_sync(0xffffffffu, mine.x, 0);
  const uint32_t s_off = __shfl_sync(0xffffffffu, mine.y, 0);
  const uint32_t o_off = __shfl_sync(0xffffffffu, mine.z, 0);
  const uint32_t hw = __shfl_sync(0xffffffffu, mine.w, 0);
  const uint32_t h1 = __shfl_sync(0xffffffffu, mine.x, 1);
  const uint32_t s_kind = hw & 0xffu, o_kind = (hw >> 8) & 0xffu;
  const int nput = (int)((hw >> 16) & 0xffu), nterm = (int)(hw >> 24);
  const uint32_t self = h1 & 0xffu; /* the header's redop: the host chose OP by it */
  /* Each lane keeps the address of this call's scratch half, then shares it. */
  const uint32_t lo = odd ? mine.z : mine.x, hi = odd ? mine.w : mine.y;
  char *put[NT];
  const char *term[NT];
#pragma unroll
  for (int j = 0; j < NT; j++) {
    const uint64_t pa =
        (uint64_t)__shfl_sync(0xffffffffu, hi, 2 + j) << 32 | __shfl_sync(0xffffffffu, lo, 2 + j);
    const uint64_t ta = (uint64_t)__shfl_sync(0xffffffffu, hi, 2 + NT + j) << 32 |
                        __shfl_sync(0xffffffffu, lo, 2 + NT + j);
    put[j] = j < nput ? (char *)(uintptr_t)pa : NULL;
    term[j] = j < nterm && !(self & (1u << j)) ? (const char *)(uintptr_t)ta : NULL;
  }
  const char *s = s_kind == PCL_KBUF_INPUT    ? (const char *)(uintptr_t)a.in + s_off
                  : s_kind == PCL_KBUF_OUTPUT ? (const char *)(uintptr_t)a.out + s_off
                                              : NULL;
  char *o = o_kind == PCL_KBUF_INPUT    ? (char *)(uintptr_t)a.in + o_off
            : o_kind == PCL_KBUF_OUTPUT ? (char *)(uintptr_t)a.out + o_off
                                        : NULL;
  PCL_KPROF_STAMP(prof_ready);
  pcl_kll_watch_t w = pcl_kll_watch_make(a, PCL_KHANG_OP_EW);
  /* PCL_KPROF: two phases, the puts (op 0) and the reduction (op 1). */
  uint64_t prof_put = 0, *pp = &prof_put;
  pcl_kew_loop<T, OP, W, NT, AL>(s, put, nput, term, nterm, self, o, bytes / (uint32_t)sizeof(W),
                                 flag, &w, pp);
#ifdef PCL_KPROF
  prof_op[0] = prof_put != 0 ? prof_put : prof_ready;
  prof_op[1] = clock64();
#endif
  __syncthreads();
  pcl_kexec_end<T>(a, f64, &w, true);
  PCL_KPROF_EXIT(2);
}

/* Component c of a 16-byte unit (c known at compile time: no local memory). */
static __device__ __forceinline__ uint32_t pcl_kew_comp(uint4 u, int c) {
  return c == 0 ? u.x : c == 1 ? u.y : c == 2 ? u.z : u.w;
}

/* The EWX kernel (kernel_abi.h, pcl_kewx_t): the EW kernel's entry, flag protocol and passes,
 * for blocks of several plain streams. Its 24 16-byte units are loaded by lanes 0-23 of every
 * warp at once and shared by shuffles; lanes 8+j and 16+j hold put j and term j. */
#define PCL_KEWX_UNITS ((int)(sizeof(pcl_kewx_t) / 16))
template <typename T, int OP, typename W, bool AL>
__global__ void __launch_bounds__(PCL_KABI_LL_MAX_THREADS, 1)
    pcl_kexec_ewx(const __grid_constant__ pcl_kargs_t a) {
  constexpr int NT = PCL_KEW_MAX, NC = PCL_KEWX_COPIES;
  static_assert(PCL_KEWX_UNITS <= 32, "one unit per lane");
  PCL_KPROF_ENTRY;
  const uint4 *d = (const uint4 *)((const pcl_kewx_t *)a.blocks + blockIdx.x);
  const unsigned lane = threadIdx.x & 31u;
  const bool pdl = pcl_kpdl(a);
  const uint64_t *slot = &a.state->flag[blockIdx.x % PCL_KABI_FLAG_SLOTS];
  uint64_t f64 = 0;
  if (!pdl)
    f64 = *(volatile const uint64_t *)slot + 1;
  uint4 mine = make_uint4(0, 0, 0, 0);
  if (lane < (unsigned)PCL_KEWX_UNITS)
    mine = d[lane];
  if (pdl) {
    pcl_kdep_wait();
    f64 = *(volatile const uint64_t *)slot + 1;
  }
  const uint32_t flag = pcl_kflag32(f64), odd = (uint32_t)f64 & 1u;
  const uint32_t bytes = __shfl_sync(0xffffffffu, mine.x, 0);
  const uint32_t s_off = __shfl_sync(0xffffffffu, mine.y, 0);
  const uint32_t o_off = __shfl_sync(0xffffffffu, mine.z, 0);
  const uint32_t hw = __shfl_sync(0xffffffffu, mine.w, 0);
  const uint32_t h1 = __shfl_sync(0xffffffffu, mine.x, 1);
  const uint32_t kinds = __shfl_sync(0xffffffffu, mine.y, 1);
  const uint32_t s_kind = hw & 0xffu, o_kind = (hw >> 8) & 0xffu;
  const int nput = (int)((hw >> 16) & 0xffu), nterm = (int)(hw >> 24);
  const uint32_t self = h1 & 0xffu, ncopy = (h1 >> 16) & 0xffu, tmask = h1 >> 24;
  const uint32_t src_out = kinds & 0xffu, tdst_out = (kinds >> 8) & 0xffu;
  const uint32_t csrc_out = (kinds >> 16) & 0xffu, cdst_out = kinds >> 24;
  char *const in = (char *)(uintptr_t)a.in, *const out = (char *)(uintptr_t)a.out;
  const uint32_t lo = odd ? mine.z : mine.x, hi = odd ? mine.w : mine.y;
  const char *src[NT], *term[NT];
  char *put[NT], *tdst[NT];
#pragma unroll
  for (int j = 0; j < NT; j++) {
    const uint32_t so = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, j & 3), 2 + (j >> 2));
    const uint32_t to = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, j & 3), 4 + (j >> 2));
    const uint64_t pa =
        (uint64_t)__shfl_sync(0xffffffffu, hi, 8 + j) << 32 | __shfl_sync(0xffffffffu, lo, 8 + j);
    const uint64_t ta =
        (uint64_t)__shfl_sync(0xffffffffu, hi, 16 + j) << 32 | __shfl_sync(0xffffffffu, lo, 16 + j);
    src[j] = ((src_out >> j) & 1u ? out : in) + so;
    tdst[j] = ((tdst_out >> j) & 1u ? out : in) + to;
    put[j] = j < nput ? (char *)(uintptr_t)pa : NULL;
    term[j] = j < nterm && !(self & (1u << j)) ? (const char *)(uintptr_t)ta : NULL;
  }
  const char *csrc[NC];
  char *cdst[NC];
#pragma unroll
  for (int k = 0; k < NC; k++) {
    csrc[k] =
        ((csrc_out >> k) & 1u ? out : in) + __shfl_sync(0xffffffffu, pcl_kew_comp(mine, k), 6);
    cdst[k] =
        ((cdst_out >> k) & 1u ? out : in) + __shfl_sync(0xffffffffu, pcl_kew_comp(mine, k), 7);
  }
  const char *s = s_kind == PCL_KEW_NONE ? NULL : (s_kind == PCL_KBUF_OUTPUT ? out : in) + s_off;
  char *o = o_kind == PCL_KEW_NONE ? NULL : (o_kind == PCL_KBUF_OUTPUT ? out : in) + o_off;
  PCL_KPROF_STAMP(prof_ready);
  pcl_kll_watch_t w = pcl_kll_watch_make(a, PCL_KHANG_OP_EW);
  const uint32_t n = bytes / (uint32_t)sizeof(W);
  if (nput > 0 || ncopy > 0)
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (j < nput) {
          W v;
          pcl_kew_ld<AL>(src[j], i, &v);
          pcl_kll_wr(put[j], i, flag, v);
        }
#pragma unroll
      for (int k = 0; k < NC; k++)
        if (k < (int)ncopy) {
          W v;
          pcl_kew_ld<AL>(csrc[k], i, &v);
          pcl_kew_st<AL>(cdst[k], i, v);
        }
    }
#ifdef PCL_KPROF
  prof_op[0] = clock64();
#endif
  if (nterm > 0)
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
      W x[NT];
      pcl_kew_terms<W, NT, AL>(s, term, nterm, self, i, flag, &w, x);
      if (o != NULL) {
        pcl_kew_st<AL>(o, i, pcl_kew_reduce<T, OP, W, NT>(x, nterm));
      } else {
#pragma unroll
        for (int j = 0; j < NT; j++)
          if (tmask & (1u << j))
            pcl_kew_st<AL>(tdst[j], i, x[j]);
      }
    }
#ifdef PCL_KPROF
  prof_op[1] = clock64();
#endif
  __syncthreads();
  pcl_kexec_end<T>(a, f64, &w, true);
  PCL_KPROF_EXIT(2);
}

/* ---- the table, generated from types.def ----
 * Forms in exec_ew.h's order: reduction (types.def), packet type (pcl_kpkt_t), alignment. */
static constexpr int pcl_kew_redops[] = {
#define PCL_KREDOP(suffix, nccl) nccl,
#include "types.def"
#undef PCL_KREDOP
};
static_assert(sizeof(pcl_kew_redops) / sizeof(pcl_kew_redops[0]) == PCL_KEW_NREDOPS,
              "exec_ew.h counts types.def's reductions");
static_assert(PCL_KPKT_LL16 == 0 && PCL_KPKT_LL8 == 1 && PCL_KPKT_COUNT == 2,
              "the table's packet order");
/* avg reduces as sum (the kernel's end scales): one kernel serves both. */
static constexpr int pcl_kew_op(int op) {
  return op == ncclAvg ? ncclSum : op;
}
#define PCL_KEW_AL(T, NT, R, W)                                                                    \
  pcl_kexec_ew<T, NT, pcl_kew_op(pcl_kew_redops[R]), W, false>,                                    \
      pcl_kexec_ew<T, NT, pcl_kew_op(pcl_kew_redops[R]), W, true>
#define PCL_KEW_REDOP(T, NT, R) PCL_KEW_AL(T, NT, R, uint2), PCL_KEW_AL(T, NT, R, uint32_t)
#define PCL_KEW_NT(T, NT)                                                                          \
  {                                                                                                \
    PCL_KEW_REDOP(T, NT, 0), PCL_KEW_REDOP(T, NT, 1), PCL_KEW_REDOP(T, NT, 2),                     \
        PCL_KEW_REDOP(T, NT, 3), PCL_KEW_REDOP(T, NT, 4)                                           \
  }
static_assert(PCL_KEW_NREDOPS == 5, "PCL_KEW_NT spells out five reductions");
/* The EWX kernel's forms, in the same (reduction, packet type, alignment) order. */
#define PCL_KEWX_AL(T, R, W)                                                                       \
  pcl_kexec_ewx<T, pcl_kew_op(pcl_kew_redops[R]), W, false>,                                       \
      pcl_kexec_ewx<T, pcl_kew_op(pcl_kew_redops[R]), W, true>
#define PCL_KEWX_REDOP(T, R) PCL_KEWX_AL(T, R, uint2), PCL_KEWX_AL(T, R, uint32_t)
#define PCL_KEWX_ROW(T)                                                                            \
  {                                                                                                \
    PCL_KEWX_REDOP(T, 0), PCL_KEWX_REDOP(T, 1), PCL_KEWX_REDOP(T, 2), PCL_KEWX_REDOP(T, 3),        \
        PCL_KEWX_REDOP(T, 4)                                                                       \
  }

const pcl_kew_entry_t pcl_kew_table[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes)                                                    \
  {nccl, {PCL_KEW_NT(ctype, 2), PCL_KEW_NT(ctype, 4), PCL_KEW_NT(ctype, 8), PCL_KEWX_ROW(ctype)}},
#include "types.def"
#undef PCL_KDTYPE
};
const int pcl_kew_table_n = (int)(sizeof(pcl_kew_table) / sizeof(pcl_kew_table[0]));
