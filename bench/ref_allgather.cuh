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
  const uint64_t f64 = pcl_ref_flag_begin(a);
  const uint32_t flag = (uint32_t)f64;
  const uint64_t half = pcl_ref_half(a, f64);
  const uint64_t chunk = a.bytes / NR;
  const uint32_t cw = (uint32_t)(chunk / 8); /* 8-byte words of one chunk */
  uint32_t w0, nw;
  pcl_ref_slice((uint32_t)(chunk / 16), &w0, &nw);
  const uint64_t slot = 2 * chunk; /* packet bytes of one sender */
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + w0;
  uint2 *out = (uint2 *)a.out + w0; /* this slice of chunk 0; chunk s is cw words further */
  const int copy = (const char *)a.in != (const char *)a.out + (uint64_t)me * chunk;

  /* Phase 1: this slice of the input, as packets, into slot `me` of every peer's scratch,
   * visiting peers from me + 1 on (as the plans do) so ranks do not all hit one peer at once;
   * out of place, the same word also goes to our own chunk of the output (the plans' copy). */
  char *dst[NR];
#pragma unroll
  for (int k = 1; k < NR; k++)
    dst[k] = a.scratch[(me + k) % NR] + half + (uint64_t)me * slot + (uint64_t)w0 * 16;
  uint2 *own = out + (uint64_t)me * cw;
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    const uint2 v = in[i];
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, v, flag);
    if (copy)
      own[i] = v;
  }
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: every peer's packets of this word from our scratch (pcl_ref_recv: all loads first,
   * then the waits) into that peer's chunk of the output. */
  const char *mine = a.scratch[me] + half + (uint64_t)w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, slot, i, me, make_uint2(0, 0), flag, a, dead);
#pragma unroll
    for (int s = 0; s < NR; s++)
      if (s != me)
        out[(uint64_t)s * cw + i] = v[s];
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_allgather_kernel_of(int nranks) {
  switch (nranks) {
  case 2:
    return (const void *)pcl_ref_allgather_ll16<2>;
  case 4:
    return (const void *)pcl_ref_allgather_ll16<4>;
  case 8:
    return (const void *)pcl_ref_allgather_ll16<8>;
  default:
    return NULL;
  }
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
