/* SPDX-License-Identifier: MIT
 * The elementwise (EW) kernels: programs that executor/exec/exec_fuse.c proved run per element
 * (kernel_abi.h, pcl_kew_t), run as the hand-written one-phase LL kernels are written: the flag
 * slot and the block's descriptor loaded together at entry, no shared memory, one loop per phase,
 * and one kernel per (dtype, bound, reduction, packet type, alignment): no choice at run time. */
#include "exec_ew.cuh"

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
   * request per warp, not one per unit), and the lanes share them by shuffles (pcl_kew_enter).
   * Unused entries are loaded too (the descriptor always holds PCL_KEW_MAX): loads predicated on
   * nput/nterm would wait for the header first. Needs whole warps (exec.c picks the EW kernels
   * only then). */
  const unsigned lane = threadIdx.x & 31u;
  const unsigned unit = lane < 2u + NT ? lane : lane - NT + PCL_KEW_MAX;
  uint4 mine;
  const uint64_t f64 = pcl_kew_enter(a, (const uint4 *)d, lane < 2u + 2u * NT, unit, &mine);
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

/* ---- the table, one row per dtype (types.def) ---- */
const pcl_kew_entry_t pcl_kew_table[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes)                                                    \
  {nccl,                                                                                           \
   {PCL_KEW_NT(pcl_kexec_ew, ctype, 2), PCL_KEW_NT(pcl_kexec_ew, ctype, 4),                        \
    PCL_KEW_NT(pcl_kexec_ew, ctype, 8)}},
#include "types.def"
#undef PCL_KDTYPE
};
const int pcl_kew_table_n = (int)(sizeof(pcl_kew_table) / sizeof(pcl_kew_table[0]));
