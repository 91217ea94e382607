/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written LL16 broadcast from rank 0 (fp32, 2/4/8 ranks),
 * the opt-in ll broadcast plans' algorithm without an interpreter. Bench-only. */
#ifndef PCL_REF_BROADCAST_CUH
#define PCL_REF_BROADCAST_CUH

#include "ref_common.cuh"

/* Arguments, scratch layout, flag protocol, double scratch, work split and acks: ref_common.cuh.
 * Here in = out = bytes, the root (rank 0) is the only sender, its slot (slot 0 of every peer's
 * scratch) holds the whole message as packets (slot = 2 * bytes), and the blocks split the
 * message. The peers ack each call to the root, which waits for them (as the plans' signal and
 * wait), so the root never runs two calls ahead of a peer.
 *
 * Deadlock-free: the root's puts wait for nothing, the peers wait only for them, and the root
 * waits for the acks only after all of its puts.
 *
 * In place (in == out): the root's buffer already holds the message, and a peer only writes its
 * output. Out of place the root copies its input to its output with the puts (the plans' copy). */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank (see ref_allreduce.cuh). */
__global__ void __launch_bounds__(1024)
    pcl_ref_broadcast_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const pcl_ref_call_t c = pcl_ref_call_begin(a, 1);
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + c.w0;
  uint2 *out = (uint2 *)a.out + c.w0;
  int dead = 0;
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));

  if (me == 0) {
    /* Root: this slice, as packets, into slot 0 of every peer's scratch (pcl_ref_put_all: peers
     * from 1 on, the plans' order), and out of place into the output; then, thread k, peer k's
     * ack (all peers' at once). */
    pcl_ref_put_all<NR>(a, c, in, in != out ? out : NULL);
    PCL_REF_PROF(prof_op[0] = clock64());
    if (a.bytes > 0 && threadIdx.x >= 1 && threadIdx.x < NR)
      pcl_ref_ack_wait(a, c.half, (int)threadIdx.x, c.flag, dead);
  } else {
    /* Peer: the root's packets of this slice from our scratch into the output, then the ack. */
    const char *mine = a.scratch[me] + c.half + (uint64_t)c.w0 * 16;
    for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x)
      out[i] = pcl_ref_wait1(mine + (uint64_t)i * 16, c.flag, a, dead);
    PCL_REF_PROF(prof_op[0] = clock64());
    if (a.bytes > 0) {
      __syncthreads();
      if (threadIdx.x == 0)
        pcl_ref_ack(a, c.half, 0, c.flag);
    }
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  pcl_ref_flag_end(a, c.f64);
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* ---- host side ---- */

static inline const void *pcl_ref_broadcast_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_broadcast_ll16<2>,
                      (const void *)pcl_ref_broadcast_ll16<4>,
                      (const void *)pcl_ref_broadcast_ll16<8>);
}

/* Scratch half bytes one rank needs for messages up to max_bytes: the root's slot of
 * 2 * max_bytes, and the acks. */
static inline uint64_t pcl_ref_broadcast_half_bytes(int nranks, uint64_t max_bytes) {
  (void)nranks;
  return 2ull * max_bytes + PCL_REF_ACK_BYTES;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run.
 * bytes 0 runs the flag protocol alone, without acks (see pcl_ref_allreduce_launch). */
static inline cudaError_t pcl_ref_broadcast_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                   int threads, cudaStream_t stream) {
  if (!pcl_ref_shape_fits(nranks, a, blocks, threads, 1, 2 * a->bytes + PCL_REF_ACK_BYTES))
    return cudaErrorInvalidValue;
  return pcl_ref_launch(pcl_ref_broadcast_kernel_of(nranks), a, blocks, threads, stream);
}

#endif
