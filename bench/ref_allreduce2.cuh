/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written two-phase LL16 allreduce (fp32 sum, 2/4/8 ranks),
 * the opt-in ll2 plans' algorithm (reduce-scatter, then allgather) without an interpreter. */
#ifndef PCL_REF_ALLREDUCE2_CUH
#define PCL_REF_ALLREDUCE2_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch and work split: ref_common.cuh. Here
 * in = out = bytes (nranks chunks of c = bytes / nranks) and the blocks split one chunk: block b
 * owns the same slice of every chunk. A half holds two regions of nranks sender slots of
 * slot = 2 * c bytes: the first gets the peers' input chunks (phase 1), the second, from
 * nranks * slot on, their reduced chunks (phase 2).
 *
 * Deadlock-free although phase 2 puts after it waits: phase 1 waits for nothing, phase 2 only
 * for phase 1 packets and phase 3 only for phase 2 packets, so every wait is met once all the
 * blocks of all ranks run at once (as the harness checks).
 *
 * In place (in == out) is safe: word i of every chunk is touched by one thread of one rank only,
 * and that thread reads input word i of chunk p (phase 1, p != me; phase 2, p == me) before it
 * writes output word i of chunk p (phase 3; phase 2). */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank (see ref_allreduce.cuh). 1024:
 * the 2-rank plans' block size. */
__global__ void __launch_bounds__(1024)
    pcl_ref_allreduce2_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const pcl_ref_call_t c = pcl_ref_call_begin(a, NR);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0; /* this slice of chunk 0; chunk p is cw further */
  uint2 *out = (uint2 *)a.out + c.w0;
  const uint64_t reduced = NR * c.slot; /* the second region, from the half's start */

  /* Phase 1: this slice of input chunk p, as packets, into slot `me` of peer p's scratch
   * (pcl_ref_put_chunks: ring order, a word's loads before its stores). */
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  pcl_ref_put_chunks<NR>(a, c, in);
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: our chunk = own input + the peers' packets in rank order (pcl_ref_sum_own_first:
   * the order the plans' respkt lists its sources, so results match bit for bit), into our chunk
   * of the output and, as packets, into slot `me` of every peer's second region (ring order). */
  char *dst[NR];
  pcl_ref_peer_slots<NR>(a, c, c.half + reduced, dst);
  const uint2 *own = in + (uint64_t)me * c.cw;
  uint2 *res = out + (uint64_t)me * c.cw;
  const char *mine = a.scratch[me] + c.half + (uint64_t)c.w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    const uint2 o = own[i];
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, c.slot, i, me, o, c.flag, a, dead);
    const uint2 r = pcl_ref_sum_own_first<NR>(o, v, me);
    res[i] = r;
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, r, c.flag);
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  /* Phase 3: every peer's reduced chunk from our second region into its chunk of the output. */
  pcl_ref_gather<NR>(a, c, out, mine + reduced, dead);
  PCL_REF_PROF(prof_op[2] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(3));
}

/* ---- host side ---- */

static inline const void *pcl_ref_allreduce2_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_allreduce2_ll16<2>,
                      (const void *)pcl_ref_allreduce2_ll16<4>,
                      (const void *)pcl_ref_allreduce2_ll16<8>);
}

/* Scratch half bytes one rank needs for messages up to max_bytes: two regions of nranks slots of
 * 2 * max_bytes / nranks. */
static inline uint64_t pcl_ref_allreduce2_half_bytes(int nranks, uint64_t max_bytes) {
  (void)nranks;
  return 4ull * max_bytes;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run
 * (bytes must split into nranks chunks of whole 16-byte units). bytes 0 runs the flag protocol
 * alone, a timing control (see pcl_ref_allreduce_launch). */
static inline cudaError_t pcl_ref_allreduce2_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                    int threads, cudaStream_t stream) {
  /* A sender's slot in either region: 2 * 2 * bytes / nranks per sender. */
  if (nranks < 1 || !pcl_ref_shape_ok(nranks, a, blocks, threads, (uint64_t)nranks,
                                      4 * (a->bytes / (uint64_t)nranks)))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_allreduce2_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
