/* SPDX-License-Identifier: MIT
 * Private to kernels/: the device pieces the EW kernels (exec_ew.cu) and the EWX kernels
 * (exec_ewx.cu) share: plain loads and stores, the terms' gather, the reduction in term order,
 * and the reduction table both kernel tables are generated from. */
#ifndef PCL_EXEC_EW_CUH
#define PCL_EXEC_EW_CUH

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

/* The entry of the EW and EWX kernels: the flag of this call from the block's slot, and this
 * lane's 16-byte unit `unit` of the block's descriptor `d` where `load` (the lanes then share
 * the units by shuffles). The loads do not depend on the flag, so they overlap the slot's.
 * Launched with PDL, the slot is read after pcl_kdep_wait and the descriptor before; without,
 * the slot first and no wait, as in pcl_kstart (exec_end.cuh). The host wrote the descriptor
 * before the launch; the slot is the previous call's kernel's. */
static __device__ __forceinline__ uint64_t pcl_kew_enter(const pcl_kargs_t &a, const uint4 *d,
                                                         bool load, unsigned unit, uint4 *mine) {
  const bool pdl = pcl_kpdl(a);
  const uint64_t *slot = &a.state->flag[blockIdx.x % PCL_KABI_FLAG_SLOTS];
  uint64_t f64 = 0;
  if (!pdl)
    f64 = *(volatile const uint64_t *)slot + 1;
  *mine = make_uint4(0, 0, 0, 0);
  if (load)
    *mine = d[unit];
  if (pdl) {
    pcl_kdep_wait();
    f64 = *(volatile const uint64_t *)slot + 1;
  }
  return f64;
}

/* ---- the forms, generated from types.def ----
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
/* One bound's forms of kernel template K<T, NT, OP, W, AL>, in the forms' order. */
#define PCL_KEW_AL(K, T, NT, R, W)                                                                 \
  K<T, NT, pcl_kew_op(pcl_kew_redops[R]), W, false>,                                               \
      K<T, NT, pcl_kew_op(pcl_kew_redops[R]), W, true>
#define PCL_KEW_REDOP(K, T, NT, R) PCL_KEW_AL(K, T, NT, R, uint2), PCL_KEW_AL(K, T, NT, R, uint32_t)
#define PCL_KEW_NT(K, T, NT)                                                                       \
  {                                                                                                \
    PCL_KEW_REDOP(K, T, NT, 0), PCL_KEW_REDOP(K, T, NT, 1), PCL_KEW_REDOP(K, T, NT, 2),            \
        PCL_KEW_REDOP(K, T, NT, 3), PCL_KEW_REDOP(K, T, NT, 4)                                     \
  }
static_assert(PCL_KEW_NREDOPS == 5, "PCL_KEW_NT spells out five reductions");
#endif
