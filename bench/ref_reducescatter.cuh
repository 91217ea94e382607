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
  const pcl_ref_call_t c = pcl_ref_call_begin(a, NR);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0; /* this slice of chunk 0; chunk p is cw further */
  uint2 *out = (uint2 *)a.out + c.w0;

  /* Phase 1: this slice of input chunk p, as packets, into slot `me` of peer p's scratch
   * (pcl_ref_put_chunks: ring order, a word's loads before its stores). */
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  pcl_ref_put_chunks<NR>(a, c, in);
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: out = own chunk + the peers' packets in rank order (pcl_ref_sum_own_first: the
   * plans' order, so results match bit for bit); pcl_ref_recv issues all loads first, then
   * waits. */
  const uint2 *own = in + (uint64_t)me * c.cw;
  const char *mine = a.scratch[me] + c.half + (uint64_t)c.w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    const uint2 o = own[i];
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, c.slot, i, me, o, c.flag, a, dead);
    out[i] = pcl_ref_sum_own_first<NR>(o, v, me);
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_reducescatter_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_reducescatter_ll16<2>,
                      (const void *)pcl_ref_reducescatter_ll16<4>,
                      (const void *)pcl_ref_reducescatter_ll16<8>);
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
