/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written one-shot LL16 reduce-scatter (fp32 sum, 2/4/8
 * ranks), the shipped opt-in ll reduce-scatter plans' algorithm without an interpreter. */
#ifndef PCL_REF_REDUCESCATTER_CUH
#define PCL_REF_REDUCESCATTER_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch and work split: ref_common.cuh. Here
 * bytes is the input (nranks chunks of c = bytes / nranks), the output is one chunk, each
 * sender's slot holds the chunk it sends that peer as packets (slot = 2 * c) and the blocks
 * split one chunk: block b owns the same slice of every chunk.
 *
 * In place means out == in + rank * c (NCCL's placement). Safe: phase 1 reads only the other
 * ranks' chunks of the input, and in phase 2 a thread reads word i of our own chunk before
 * writing output word i, the same address; no other thread of any rank touches it. */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank (see ref_allreduce.cuh). */
__global__ void __launch_bounds__(1024)
    pcl_ref_reducescatter_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const uint64_t f64 = pcl_ref_flag_begin(a);
  const uint32_t flag = (uint32_t)f64;
  const uint64_t half = pcl_ref_half(a, f64);
  const uint64_t chunk = a.bytes / NR;
  const uint32_t cw = (uint32_t)(chunk / 8); /* 8-byte words of one chunk */
  uint32_t w0, nw;
  pcl_ref_slice((uint32_t)(chunk / 16), &w0, &nw);
  const uint64_t slot = 2 * chunk; /* packet bytes of one sender */
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + w0; /* this slice of chunk 0; chunk p is cw further */
  uint2 *out = (uint2 *)a.out + w0;

  /* Phase 1: this slice of input chunk p, as packets, into slot `me` of peer p's scratch,
   * visiting peers from me + 1 on (as the plans do) so ranks do not all hit one peer at once.
   * A word's loads are all issued before its stores (which the compiler may not reorder). */
  char *dst[NR];
  const uint2 *src[NR];
#pragma unroll
  for (int k = 1; k < NR; k++) {
    const int p = (me + k) % NR;
    dst[k] = a.scratch[p] + half + (uint64_t)me * slot + (uint64_t)w0 * 16;
    src[k] = in + (uint64_t)p * cw;
  }
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    uint2 v[NR];
#pragma unroll
    for (int k = 1; k < NR; k++)
      v[k] = src[k][i];
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, v[k], flag);
  }
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: out = own chunk + the peers' packets in rank order, the order the plans' repkt
   * lists its sources (own input first, then scratch by sender), so results match bit for bit;
   * pcl_ref_recv issues all loads first, then waits. */
  const uint2 *own = in + (uint64_t)me * cw;
  const char *mine = a.scratch[me] + half + (uint64_t)w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    const uint2 o = own[i];
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, slot, i, me, o, flag, a, dead);
    float x = __uint_as_float(o.x), y = __uint_as_float(o.y);
#pragma unroll
    for (int s = 0; s < NR; s++)
      if (s != me) {
        x += __uint_as_float(v[s].x);
        y += __uint_as_float(v[s].y);
      }
    out[i] = make_uint2(__float_as_uint(x), __float_as_uint(y));
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_reducescatter_kernel_of(int nranks) {
  switch (nranks) {
  case 2:
    return (const void *)pcl_ref_reducescatter_ll16<2>;
  case 4:
    return (const void *)pcl_ref_reducescatter_ll16<4>;
  case 8:
    return (const void *)pcl_ref_reducescatter_ll16<8>;
  default:
    return NULL;
  }
}

/* Scratch half bytes one rank needs for messages (inputs) up to max_bytes: nranks slots of
 * 2 * max_bytes / nranks. */
static inline uint64_t pcl_ref_reducescatter_half_bytes(int nranks, uint64_t max_bytes) {
  (void)nranks;
  return 2ull * max_bytes;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run
 * (bytes must split into nranks chunks of whole 16-byte units). bytes 0 runs the flag protocol
 * alone, a timing control (see pcl_ref_allreduce_launch). */
static inline cudaError_t pcl_ref_reducescatter_launch(int nranks, const pcl_ref_args_t *a,
                                                       int blocks, int threads,
                                                       cudaStream_t stream) {
  if (nranks < 1 || !pcl_ref_shape_ok(nranks, a, blocks, threads, (uint64_t)nranks,
                                      2 * (a->bytes / (uint64_t)nranks)))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_reducescatter_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
