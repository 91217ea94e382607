/* SPDX-License-Identifier: MIT
 * The EWX kernels: blocks that executor/exec/exec_fuse.c proved run per element while moving
 * several plain ranges (kernel_abi.h, pcl_kewx_t): allgather, reduce-scatter, broadcast, reduce.
 * Written as the EW kernels are, one kernel per (dtype, bound, reduction, packet type, alignment).
 */
#include "exec_ew.cuh"

/* Component c of a 16-byte unit (c known at compile time: no local memory). */
static __device__ __forceinline__ uint32_t pcl_kew_comp(uint4 u, int c) {
  return c == 0 ? u.x : c == 1 ? u.y : c == 2 ? u.z : u.w;
}

/* Semaphore op j of an EWX block, whose 16-byte unit `u` this lane holds: a signal adds 1 to
 * the peer's inbound counter after the block's stores (the caller's __syncthreads orders them
 * first; release, or relaxed where the plan says so); a wait raises this channel's expected
 * count and spins until the inbound counter reaches it (acquire, or relaxed). */
static __device__ __forceinline__ void pcl_kewx_sync_one(uint4 u, int wait, int relaxed,
                                                         pcl_kll_watch_t *w) {
  uint64_t *a = (uint64_t *)(uintptr_t)((uint64_t)u.y << 32 | u.x);
  if (!wait) {
    if (relaxed)
      pcl_katomic_add_relaxed_sys(a, 1);
    else
      pcl_katomic_add_release_sys(a, 1);
    return;
  }
  uint64_t *exp = (uint64_t *)(uintptr_t)((uint64_t)u.w << 32 | u.z);
  const uint64_t e = *exp + 1;
  *exp = e;
  w->start = 0;
  w->n = 0;
  pcl_kwait_on(w, a, (uint32_t)e, PCL_KWAIT_INBOUND);
  for (;;) {
    const uint64_t v = relaxed ? pcl_kload_relaxed_sys(a) : pcl_kload_acquire_sys(a);
    if ((int64_t)(v - e) >= 0 || pcl_kll_tick(w))
      break;
  }
}

/* The block's semaphore ops, by warp 0 (lane 24 + j holds op j): all at once when they are all
 * signals or all waits, else one after another in the ops' order. */
static __device__ __forceinline__ void pcl_kewx_sync(uint4 mine, unsigned lane, uint32_t nsync,
                                                     uint32_t waits, uint32_t relaxed,
                                                     pcl_kll_watch_t *w) {
  const uint32_t all = (1u << nsync) - 1u;
  if ((waits & all) == 0 || (waits & all) == all) {
    const int j = (int)lane - 24;
    if (j >= 0 && j < (int)nsync)
      pcl_kewx_sync_one(mine, (waits >> j) & 1u, (relaxed >> j) & 1u, w);
    return;
  }
  for (int j = 0; j < (int)nsync; j++) {
    uint4 u;
    u.x = __shfl_sync(0xffffffffu, mine.x, 24 + j);
    u.y = __shfl_sync(0xffffffffu, mine.y, 24 + j);
    u.z = __shfl_sync(0xffffffffu, mine.z, 24 + j);
    u.w = __shfl_sync(0xffffffffu, mine.w, 24 + j);
    if (lane == 0)
      pcl_kewx_sync_one(u, (waits >> j) & 1u, (relaxed >> j) & 1u, w);
  }
}

/* A plain location of the call: `off` bytes into the output when `is_out`, else the input. */
static __device__ __forceinline__ char *pcl_kewx_at(char *in, char *out, uint32_t is_out,
                                                    uint32_t off) {
  return (is_out ? out : in) + off;
}

/* The EWX kernel (kernel_abi.h, pcl_kewx_t): the EW kernel's entry, flag protocol and passes,
 * for blocks of several plain streams. Its 32 16-byte units are loaded by the 32 lanes of every
 * warp at once and shared by shuffles; lanes 8+j, 16+j and 24+j hold put j, term j and
 * semaphore op j. Plain locations stay 32-bit offsets in registers (the address is formed at
 * each use): 64-bit pointers for every stream spilled the bound-8 kernel's registers. NT bounds
 * nput and nterm, as the EW kernels' bound. */
#define PCL_KEWX_UNITS ((int)(sizeof(pcl_kewx_t) / 16))
template <typename T, int NT, int OP, typename W, bool AL>
__global__ void __launch_bounds__(PCL_KABI_LL_MAX_THREADS, 1)
    pcl_kexec_ewx(const __grid_constant__ pcl_kargs_t a) {
  constexpr int NC = PCL_KEWX_COPIES;
  static_assert(PCL_KEWX_UNITS <= 32 && NT <= PCL_KEW_MAX, "one unit per lane");
  PCL_KPROF_ENTRY;
  const uint4 *d = (const uint4 *)((const pcl_kewx_t *)a.blocks + blockIdx.x);
  const unsigned lane = threadIdx.x & 31u;
  uint4 mine;
  const uint64_t f64 = pcl_kew_enter(a, d, lane < (unsigned)PCL_KEWX_UNITS, lane, &mine);
  const uint32_t flag = pcl_kflag32(f64), odd = (uint32_t)f64 & 1u;
  const uint32_t bytes = __shfl_sync(0xffffffffu, mine.x, 0);
  const uint32_t s_off = __shfl_sync(0xffffffffu, mine.y, 0);
  const uint32_t o_off = __shfl_sync(0xffffffffu, mine.z, 0);
  const uint32_t hw = __shfl_sync(0xffffffffu, mine.w, 0);
  const uint32_t h1 = __shfl_sync(0xffffffffu, mine.x, 1);
  const uint32_t kinds = __shfl_sync(0xffffffffu, mine.y, 1);
  const uint32_t sy = __shfl_sync(0xffffffffu, mine.z, 1);
  const uint32_t s_kind = hw & 0xffu, o_kind = (hw >> 8) & 0xffu;
  const int nput = (int)((hw >> 16) & 0xffu), nterm = (int)(hw >> 24);
  const uint32_t self = h1 & 0xffu, ncopy = (h1 >> 16) & 0xffu, tmask = h1 >> 24;
  char *const in = (char *)(uintptr_t)a.in, *const out = (char *)(uintptr_t)a.out;
  const uint32_t lo = odd ? mine.z : mine.x, hi = odd ? mine.w : mine.y;
  uint32_t src[NT], tdst[NT], csrc[NC], cdst[NC];
  const char *term[NT];
  char *put[NT];
#pragma unroll
  for (int j = 0; j < NT; j++) {
    src[j] = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, j & 3), 2 + (j >> 2));
    tdst[j] = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, j & 3), 4 + (j >> 2));
    const uint64_t pa =
        (uint64_t)__shfl_sync(0xffffffffu, hi, 8 + j) << 32 | __shfl_sync(0xffffffffu, lo, 8 + j);
    const uint64_t ta =
        (uint64_t)__shfl_sync(0xffffffffu, hi, 16 + j) << 32 | __shfl_sync(0xffffffffu, lo, 16 + j);
    put[j] = j < nput ? (char *)(uintptr_t)pa : NULL;
    term[j] = j < nterm && !(self & (1u << j)) ? (const char *)(uintptr_t)ta : NULL;
  }
#pragma unroll
  for (int k = 0; k < NC; k++) {
    csrc[k] = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, k), 6);
    cdst[k] = __shfl_sync(0xffffffffu, pcl_kew_comp(mine, k), 7);
  }
  const char *s =
      s_kind == PCL_KEW_NONE ? NULL : pcl_kewx_at(in, out, s_kind == PCL_KBUF_OUTPUT, s_off);
  char *o = o_kind == PCL_KEW_NONE ? NULL : pcl_kewx_at(in, out, o_kind == PCL_KBUF_OUTPUT, o_off);
  PCL_KPROF_STAMP(prof_ready);
  pcl_kll_watch_t w = pcl_kll_watch_make(a, PCL_KHANG_OP_EW);
  const uint32_t n = bytes / (uint32_t)sizeof(W);
  /* First pass: an element's loads are all issued before any of its stores, as in the
   * hand-written kernels (the compiler may not move a load past a store that might alias it, so
   * load, store, load, store would wait out every load in turn: reduce-scatter's puts read a
   * different source each). The order of an element's accesses that can meet is kept: puts
   * write only scratch, a copy never writes what another copy reads (exec_fuse.c,
   * ewx_copies_safe), and the puts' sources are still read before the copies' stores. */
  if (nput > 0 || ncopy > 0)
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
      W pv[NT], cv[NC];
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (j < nput)
          pcl_kew_ld<AL>(pcl_kewx_at(in, out, (kinds >> j) & 1u, src[j]), i, &pv[j]);
#pragma unroll
      for (int k = 0; k < NC; k++)
        if (k < (int)ncopy)
          pcl_kew_ld<AL>(pcl_kewx_at(in, out, (kinds >> (16 + k)) & 1u, csrc[k]), i, &cv[k]);
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (j < nput)
          pcl_kll_wr(put[j], i, flag, pv[j]);
#pragma unroll
      for (int k = 0; k < NC; k++)
        if (k < (int)ncopy)
          pcl_kew_st<AL>(pcl_kewx_at(in, out, (kinds >> (24 + k)) & 1u, cdst[k]), i, cv[k]);
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
            pcl_kew_st<AL>(pcl_kewx_at(in, out, (kinds >> (8 + j)) & 1u, tdst[j]), i, x[j]);
      }
    }
#ifdef PCL_KPROF
  prof_op[1] = clock64();
#endif
  __syncthreads();
  if ((sy & 0xffu) != 0) { /* every thread's stores precede the signals; the waits the end */
    if (threadIdx.x < 32)
      pcl_kewx_sync(mine, lane, sy & 0xffu, (sy >> 8) & 0xffu, (sy >> 16) & 0xffu, &w);
    __syncthreads();
  }
  pcl_kexec_end<T>(a, f64, &w, true);
  PCL_KPROF_EXIT(2);
}

/* ---- the table, one row per dtype (types.def) ---- */
const pcl_kew_entry_t pcl_kewx_table[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes)                                                    \
  {nccl,                                                                                           \
   {PCL_KEW_NT(pcl_kexec_ewx, ctype, 2), PCL_KEW_NT(pcl_kexec_ewx, ctype, 4),                      \
    PCL_KEW_NT(pcl_kexec_ewx, ctype, 8)}},
#include "types.def"
#undef PCL_KDTYPE
};
const int pcl_kewx_table_n = (int)(sizeof(pcl_kewx_table) / sizeof(pcl_kewx_table[0]));
