/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written LL16 reduce to rank 0 (fp32 sum, 2/4/8 ranks),
 * the opt-in ll reduce plans' algorithm without an interpreter. Bench-only. */
#ifndef PCL_REF_REDUCE_CUH
#define PCL_REF_REDUCE_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch, work split and acks: ref_common.cuh.
 * Here in = out = bytes, the root (rank 0) is the only receiver: each peer's slot of its scratch
 * holds that peer's whole input as packets (slot = 2 * bytes), and the blocks split the message.
 * Only the root's output is defined; the peers' stays as it was. The root acks each call to
 * every peer, which waits for it (as the plans' signal and wait), so no peer runs two calls
 * ahead of the root.
 *
 * Deadlock-free: the peers' puts wait for nothing, the root waits only for them, and a peer
 * waits for the ack only after all of its puts.
 *
 * In place (in == out) is safe: a root thread reads input word i before it writes output word i,
 * and no other thread of any rank touches it. */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank (see ref_allreduce.cuh). */
__global__ void __launch_bounds__(1024)
    pcl_ref_reduce_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const pcl_ref_call_t c = pcl_ref_call_begin(a, 1);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0;
  int dead = 0;
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));

  if (me == 0) {
    /* Root: out = x0 + x1 + ... + x(NR-1), own input first, then the peers' packets in rank
     * order (pcl_ref_sum_own_first: the plans' repkt order, so results match bit for bit);
     * then the acks, thread k to peer k. */
    uint2 *out = (uint2 *)a.out + c.w0;
    const char *mine = a.scratch[0] + c.half + (uint64_t)c.w0 * 16;
    for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
      const uint2 o = in[i];
      uint2 v[NR];
      pcl_ref_recv<NR>(v, mine, c.slot, i, 0, o, c.flag, a, dead);
      out[i] = pcl_ref_sum_own_first<NR>(o, v, 0);
    }
    PCL_REF_PROF(prof_op[0] = clock64());
    if (a.bytes > 0) {
      __syncthreads();
      if (threadIdx.x >= 1 && threadIdx.x < NR)
        pcl_ref_ack(a, c.half, (int)threadIdx.x, c.flag);
    }
  } else {
    /* Peer: this slice of the input, as packets, into slot `me` of the root's scratch; then the
     * root's ack. */
    char *dst = a.scratch[0] + c.half + (uint64_t)me * c.slot + (uint64_t)c.w0 * 16;
    for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x)
      pcl_ll16_store(dst + (uint64_t)i * 16, in[i], c.flag);
    PCL_REF_PROF(prof_op[0] = clock64());
    if (a.bytes > 0 && threadIdx.x == 0)
      pcl_ref_ack_wait(a, c.half, 0, c.flag, dead);
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_reduce_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_reduce_ll16<2>,
                      (const void *)pcl_ref_reduce_ll16<4>, (const void *)pcl_ref_reduce_ll16<8>);
}

/* Scratch half bytes one rank needs for messages up to max_bytes: nranks slots of
 * 2 * max_bytes (slot 0, the root's own, unused), and the acks. */
static inline uint64_t pcl_ref_reduce_half_bytes(int nranks, uint64_t max_bytes) {
  return (uint64_t)nranks * 2ull * max_bytes + PCL_REF_ACK_BYTES;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run.
 * bytes 0 runs the flag protocol alone, without acks (see pcl_ref_allreduce_launch). */
static inline cudaError_t pcl_ref_reduce_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                int threads, cudaStream_t stream) {
  if (!pcl_ref_shape_fits(nranks, a, blocks, threads, 1,
                          (uint64_t)nranks * 2 * a->bytes + PCL_REF_ACK_BYTES))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_reduce_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
