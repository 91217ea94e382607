/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written one-shot LL16 allgather (fp32, 2/4/8 ranks), the
 * shipped opt-in ll allgather plans' algorithm without an interpreter. Bench-only. */
#ifndef PCL_REF_ALLGATHER_CUH
#define PCL_REF_ALLGATHER_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch and work split: ref_common.cuh. Here
 * bytes is the output (nranks chunks of c = bytes / nranks), the input is one chunk, each
 * sender's slot holds that chunk as packets (slot = 2 * c) and the blocks split one chunk: block
 * b owns the same slice of every chunk.
 *
 * In place means in == out + rank * c (NCCL's placement): the own chunk is then already where it
 * belongs and is not copied. Safe: phase 1 only reads the input, phase 2 only writes the other
 * ranks' chunks of the output, which never overlap it. */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank (see ref_allreduce.cuh). */
__global__ void __launch_bounds__(1024)
    pcl_ref_allgather_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const pcl_ref_call_t c = pcl_ref_call_begin(a, NR);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0;
  uint2 *out = (uint2 *)a.out + c.w0; /* this slice of chunk 0; chunk s is cw words further */
  uint2 *own = out + (uint64_t)me * c.cw;

  /* Phase 1: this slice of the input, as packets, into slot `me` of every peer's scratch
   * (pcl_ref_put_all: ring order); out of place, the same word also goes to our own chunk of
   * the output (the plans' copy). */
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  pcl_ref_put_all<NR>(a, c, in, in != own ? own : NULL);
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: every peer's packets of this slice from our scratch into that peer's chunk of the
   * output (pcl_ref_gather). */
  int dead = 0;
  pcl_ref_gather<NR>(a, c, out, a.scratch[me] + c.half + (uint64_t)c.w0 * 16, dead);
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_allgather_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_allgather_ll16<2>,
                      (const void *)pcl_ref_allgather_ll16<4>,
                      (const void *)pcl_ref_allgather_ll16<8>);
}

/* Scratch half bytes one rank needs for messages (outputs) up to max_bytes: nranks slots of
 * 2 * max_bytes / nranks. */
static inline uint64_t pcl_ref_allgather_half_bytes(int nranks, uint64_t max_bytes) {
  (void)nranks;
  return 2ull * max_bytes;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run
 * (bytes must split into nranks chunks of whole 16-byte units). bytes 0 runs the flag protocol
 * alone, a timing control (see pcl_ref_allreduce_launch). */
static inline cudaError_t pcl_ref_allgather_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                   int threads, cudaStream_t stream) {
  if (nranks < 1 || !pcl_ref_shape_ok(nranks, a, blocks, threads, (uint64_t)nranks,
                                      2 * (a->bytes / (uint64_t)nranks)))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_allgather_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
