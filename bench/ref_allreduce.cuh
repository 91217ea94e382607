/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written one-phase LL16 allreduce (fp32 sum, 2/4/8 ranks),
 * the shipped ll1 plans' algorithm without an interpreter. Bench-only; no user call runs it. */
#ifndef PCL_REF_ALLREDUCE_CUH
#define PCL_REF_ALLREDUCE_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch and work split: ref_common.cuh. Here
 * in = out = bytes (in may equal out: in place), each sender's slot holds the whole message as
 * packets (slot = 2 * bytes) and the blocks split the message.
 *
 * In place is safe: a thread reads input word i (phase 1 and 2) before writing output word i,
 * and no other thread of any rank touches word i of this rank's buffers. */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank; without it nvcc would copy the
 * whole argument block into every thread's local memory to index it. */
__global__ void __launch_bounds__(1024)
    pcl_ref_allreduce_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const pcl_ref_call_t c = pcl_ref_call_begin(a, 1);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0;
  uint2 *out = (uint2 *)a.out + c.w0;

  /* Phase 1: this slice of the input, as packets, into slot `me` of every peer's scratch
   * (pcl_ref_put_all: ring order). */
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  pcl_ref_put_all<NR>(a, c, in, NULL);
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: out = x0 + x1 + ... + x(NR-1) in rank order (what the N-rank plans compute, so
   * every rank gets bit-identical sums), own term from the input, the others from the packets
   * in our own scratch (pcl_ref_recv: all loads first, then the waits). */
  const char *mine = a.scratch[me] + c.half + (uint64_t)c.w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, c.slot, i, me, in[i], c.flag, a, dead);
    float x = __uint_as_float(v[0].x), y = __uint_as_float(v[0].y);
#pragma unroll
    for (int s = 1; s < NR; s++) {
      x += __uint_as_float(v[s].x);
      y += __uint_as_float(v[s].y);
    }
    out[i] = make_uint2(__float_as_uint(x), __float_as_uint(y));
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_allreduce_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_allreduce_ll16<2>,
                      (const void *)pcl_ref_allreduce_ll16<4>,
                      (const void *)pcl_ref_allreduce_ll16<8>);
}

/* Scratch half bytes one rank needs for messages up to max_bytes. */
static inline uint64_t pcl_ref_allreduce_half_bytes(int nranks, uint64_t max_bytes) {
  return (uint64_t)nranks * 2ull * max_bytes;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run.
 * bytes 0 runs the flag protocol alone (a timing control): such calls move no data, so the
 * double-scratch argument, which needs every call to wait for its peers, is not needed. */
static inline cudaError_t pcl_ref_allreduce_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                   int threads, cudaStream_t stream) {
  if (!pcl_ref_shape_ok(nranks, a, blocks, threads, 1, 2 * a->bytes))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_allreduce_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
