/* SPDX-License-Identifier: MIT
 * planccl-refbench's references for the opt-in Simple allreduce plans (fp32 sum, 2/4/8 ranks):
 * plain 16-byte stores into peers' scratch and counting semaphores, whole or in 16 KiB units. */
#ifndef PCL_REF_ALLREDUCE_SIMPLE_CUH
#define PCL_REF_ALLREDUCE_SIMPLE_CUH

#include "ref_common.cuh"

/* The algorithm of plans/dsl/algorithms/allreduce_simple.py (plans <n>gpu_simple_* and
 * <n>gpu_simple_pipe_*). Rank r owns chunk r of c = bytes / NR bytes. A call: a handshake; r puts
 * its input chunk q into slot slot(r, q) of peer q's scratch (peers in ring order); sync; r reduces
 * its own chunk (own input first, then its slots, i.e. the senders in rank order: the plans'
 * order, so sums match bit for bit) into its output and puts the result into slot
 * NR - 1 + slot(r, q) of every peer q; sync; r copies every peer's result out of its scratch.
 * slot(s, r) = s - (s > r): one slot per peer, none for the receiver.
 *
 * Block b does the same slice of every chunk on every rank (the plans' tbg slicing, 16-byte
 * units, as pcl_ref_slice) and synchronises with block b of each peer alone, over its own
 * counters, as the plans' one memory channel per (block, peer) does. A sync is the plans'
 * signal + wait: __syncthreads; thread t < NR - 1 adds 1 (system-scope release) to peer
 * (r + 1 + t) % NR's counter of (r, b), then waits (acquire) for its own counter of that peer to
 * reach one more than it did; __syncthreads.
 *   simple (8 x 1024): each phase covers the block's whole slice: 3 syncs per call.
 *   simple_pipe (8 instances of one 1024-thread block, unit_size 16 KiB): after the handshake
 *   the three phases go over the block's slice 16 KiB at a time, two syncs per unit:
 *   1 + 2 * ceil(slice / 16 KiB) syncs per call. Its plans cut a chunk into 8 equal parts
 *   (sizes multiples of 128 x ranks); the balanced slice is the same part there.
 *
 * Scratch: no packets, and every call reuses the same slots, so the reference takes its whole
 * scratch (2 * half_bytes, zeroed once) as one region, the same for calls of every size:
 *   [0, SEM):       inbound[s][b], u64: how often block b of sender s signalled our block b;
 *   [SEM, 2 SEM):   expected[s][b], u64: how many of those our block b has waited for (read at
 *                   its start, written at its end: only our block b touches it);
 *   [2 SEM, ...):   2 (NR - 1) slots of c bytes: the peers' input chunks, then their results.
 * Both counters only grow, by one per sync on every rank alike, so eager calls and CUDA graph
 * replays of any size stay in step.
 *
 * Reuse is safe without double scratch: block b of r passes the handshake of call k only once
 * block b of every peer q has started call k, so q's kernel of call k - 1 (which read q's slots)
 * has ended (one stream per rank, kernels in order). Within a call each slot is written before
 * a sync (release after the writes) and read after it (acquire), by block b of the two ranks.
 *
 * In place (in == out) is safe: phase 1 reads input chunks q != r; phase 2 reads word i of chunk
 * r before the same thread writes it; phase 3 writes chunks q != r after two syncs, past the
 * block's reads of them (in the pipe: unit by unit, the same order). */

/* Semaphore bytes per kind (inbound, expected) and where the data slots start. */
#define PCL_REF_SIMPLE_SEM ((uint64_t)PCL_REF_MAX_RANKS * PCL_REF_MAX_SLOTS * 8)
#define PCL_REF_SIMPLE_DATA (2 * PCL_REF_SIMPLE_SEM)
/* The pipe plans' unit_size, in 16-byte units. */
#define PCL_REF_SIMPLE_PIPE_UNITS (16384u / 16u)

/* Elements per thread and loop trip of the whole-slice form, so that a thread keeps about 8 loads
 * in flight (phase 1 has NR - 1 per element, phase 2 NR, phase 3 NR - 1). The pipe's 16 KiB unit
 * is one element per thread of a 1024-thread block: nothing to unroll. */
#define PCL_REF_SIMPLE_UNROLL(nr) ((nr) == 2 ? 4 : (nr) == 4 ? 2 : 1)

/* This block's slice of every chunk, in 16-byte units. */
typedef struct {
  uint32_t cu;     /* units of one chunk: chunk q of a buffer starts q * cu units in */
  uint32_t u0, nu; /* the slice's first unit and length */
  uint4 **slot0;   /* [q]: slot 0 of rank q's scratch at the slice (shared memory, not registers:
                      the 8-rank loops would spill hoisted pointers) */
} pcl_ref_simple_t;

/* Counter of sender `from`'s block b in rank `owner`'s scratch (b = this block). */
static __device__ __forceinline__ uint64_t *pcl_ref_simple_inbound(const pcl_ref_args_t &a,
                                                                   int owner, int from) {
  return (uint64_t *)a.scratch[owner] + (uint32_t)from * PCL_REF_MAX_SLOTS + blockIdx.x;
}

/* Slot j of rank `owner`'s scratch, at this block's slice. */
static __device__ __forceinline__ uint4 *pcl_ref_simple_slot(const pcl_ref_simple_t &s, int owner,
                                                             int j) {
  return s.slot0[owner] + (uint64_t)j * s.cu;
}

/* Waits until *p >= want (acquire), bounded as pcl_ref_ll16_spin is: on timeout, or once
 * another thread recorded an error, records it and marks this thread dead. */
static __device__ __forceinline__ void pcl_ref_sem_wait(const uint64_t *p, uint64_t want,
                                                        const pcl_ref_args_t &a, int &dead) {
  if (dead || (int64_t)(pcl_kload_acquire_sys(p) - want) >= 0)
    return;
  const uint64_t t0 = pcl_kglobaltimer();
  for (uint32_t n = 1; (int64_t)(pcl_kload_acquire_sys(p) - want) < 0; n++)
    if ((n & 1023u) == 0 &&
        (*(volatile uint32_t *)a.error != 0 || pcl_kglobaltimer() - t0 > a.timeout_ns)) {
      atomicCAS((unsigned int *)a.error, 0u, PCL_REF_ERR_TIMEOUT);
      dead = 1;
      return;
    }
}

/* One sync of this block with block b of every peer (the plans' signal, then wait). `expected`
 * is thread t's count of waits on peer (r + 1 + t) % NR. */
template <int NR>
static __device__ __forceinline__ void pcl_ref_simple_sync(const pcl_ref_args_t &a,
                                                           uint64_t &expected, int &dead) {
  __syncthreads(); /* every thread's stores precede the release below */
  const uint32_t t = threadIdx.x;
  if (t < NR - 1) {
    const int peer = (a.rank + 1 + (int)t) % NR;
    pcl_katomic_add_release_sys(pcl_ref_simple_inbound(a, peer, a.rank), 1);
    pcl_ref_sem_wait(pcl_ref_simple_inbound(a, a.rank, peer), ++expected, a, dead);
  }
  __syncthreads(); /* the block sees what the waiting threads acquired */
}

static __device__ __forceinline__ uint4 pcl_ref_add4(uint4 x, uint4 y) {
  return make_uint4(__float_as_uint(__uint_as_float(x.x) + __uint_as_float(y.x)),
                    __float_as_uint(__uint_as_float(x.y) + __uint_as_float(y.y)),
                    __float_as_uint(__uint_as_float(x.z) + __uint_as_float(y.z)),
                    __float_as_uint(__uint_as_float(x.w) + __uint_as_float(y.w)));
}

/* The three phases over units [from, to) of this block's slice. Thread t takes units
 * from + t + j * blockDim.x, U of them per loop trip, all of a trip's loads before its stores.
 * Phases 1 and 3 have one shape but are written out: folded into one helper (a template or
 * lambdas), nvcc kept more addresses live and spilled 50-200 bytes at 2 and 4 ranks. */
template <int NR, int U>
static __device__ __forceinline__ void
pcl_ref_simple_round(const pcl_ref_args_t &a, const pcl_ref_simple_t &s, uint32_t from, uint32_t to,
                     uint64_t &expected, int &dead) {
  const int me = a.rank;
  const uint32_t nt = blockDim.x;
  const uint4 *in = (const uint4 *)a.in + s.u0;
  uint4 *out = (uint4 *)a.out + s.u0;

  /* Phase 1: input chunk q into slot slot(me, q) of peer q. */
  for (uint32_t i0 = from + threadIdx.x; i0 < to; i0 += U * nt) {
    uint4 v[U][NR];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to)
#pragma unroll
        for (int k = 1; k < NR; k++)
          v[u][k] = in[(uint32_t)((me + k) % NR) * s.cu + i0 + u * nt];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to)
#pragma unroll
        for (int k = 1; k < NR; k++) {
          const int q = (me + k) % NR;
          pcl_ref_simple_slot(s, q, me - (me > q))[i0 + u * nt] = v[u][k];
        }
  }
  pcl_ref_simple_sync<NR>(a, expected, dead);

  /* Phase 2: own chunk = own input + slots 0 .. NR - 2, into the output and into slot
   * NR - 1 + slot(me, q) of every peer q. */
  const uint4 *mine = pcl_ref_simple_slot(s, me, 0);
  for (uint32_t i0 = from + threadIdx.x; i0 < to; i0 += U * nt) {
    uint4 v[U][NR];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to) {
        v[u][0] = in[(uint32_t)me * s.cu + i0 + u * nt];
#pragma unroll
        for (int j = 1; j < NR; j++)
          v[u][j] = mine[(uint32_t)(j - 1) * s.cu + i0 + u * nt];
      }
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to) {
        uint4 r = v[u][0];
#pragma unroll
        for (int j = 1; j < NR; j++)
          r = pcl_ref_add4(r, v[u][j]);
        out[(uint32_t)me * s.cu + i0 + u * nt] = r;
#pragma unroll
        for (int k = 1; k < NR; k++) {
          const int q = (me + k) % NR;
          pcl_ref_simple_slot(s, q, NR - 1 + me - (me > q))[i0 + u * nt] = r;
        }
      }
  }
  pcl_ref_simple_sync<NR>(a, expected, dead);

  /* Phase 3: peer q's result, from slot NR - 1 + slot(q, me), into output chunk q. */
  for (uint32_t i0 = from + threadIdx.x; i0 < to; i0 += U * nt) {
    uint4 v[U][NR];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to)
#pragma unroll
        for (int k = 1; k < NR; k++) {
          const int q = (me + k) % NR;
          v[u][k] = mine[(uint32_t)(NR - 1 + q - (q > me)) * s.cu + i0 + u * nt];
        }
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i0 + u * nt < to)
#pragma unroll
        for (int k = 1; k < NR; k++)
          out[(uint32_t)((me + k) % NR) * s.cu + i0 + u * nt] = v[u][k];
  }
}

/* PIPE: the simple_pipe plans' form (16 KiB units, two syncs each), else the simple plans'. */
template <int NR, bool PIPE>
/* __grid_constant__: a.scratch is indexed with runtime ranks (see ref_allreduce.cuh). 1024: the
 * plans' block size. */
__global__ void __launch_bounds__(1024)
    pcl_ref_allreduce_simple(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  pcl_ref_simple_t s;
  s.cu = (uint32_t)(a.bytes / NR / 16);
  const uint32_t b = blockIdx.x, nb = gridDim.x, base = s.cu / nb, rem = s.cu % nb;
  s.u0 = b * base + (b < rem ? b : rem);
  s.nu = base + (b < rem ? 1u : 0u);
  const uint32_t t = threadIdx.x;
  __shared__ uint4 *slot0[NR]; /* written before the handshake's barriers, read after them */
  if (t < NR)
    slot0[t] = (uint4 *)(a.scratch[t] + PCL_REF_SIMPLE_DATA) + s.u0;
  s.slot0 = slot0;
  uint64_t *exp_at = t < NR - 1 ? (uint64_t *)(a.scratch[a.rank] + PCL_REF_SIMPLE_SEM) +
                                      (uint32_t)((a.rank + 1 + (int)t) % NR) * PCL_REF_MAX_SLOTS + b
                                : NULL;
  uint64_t expected = exp_at != NULL ? *exp_at : 0;
  int dead = 0;

  /* Handshake: every peer is in this call, so done reading its slots of the last one. */
  pcl_ref_simple_sync<NR>(a, expected, dead);
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  if (PIPE) {
    for (uint32_t from = 0; from < s.nu; from += PCL_REF_SIMPLE_PIPE_UNITS)
      pcl_ref_simple_round<NR, 1>(a, s, from, min(from + PCL_REF_SIMPLE_PIPE_UNITS, s.nu), expected,
                                  dead);
  } else {
    pcl_ref_simple_round<NR, PCL_REF_SIMPLE_UNROLL(NR)>(a, s, 0, s.nu, expected, dead);
  }
  PCL_REF_PROF(prof_op[0] = clock64());
  if (exp_at != NULL)
    *exp_at = expected; /* read again only by this block of the next call on this stream */
  PCL_REF_PROF(PCL_KPROF_EXIT(1));
}

/* ---- host side ---- */

static inline const void *pcl_ref_allreduce_simple_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_allreduce_simple<2, false>,
                      (const void *)pcl_ref_allreduce_simple<4, false>,
                      (const void *)pcl_ref_allreduce_simple<8, false>);
}

static inline const void *pcl_ref_allreduce_simple_pipe_kernel_of(int nranks) {
  return pcl_ref_pick(nranks, (const void *)pcl_ref_allreduce_simple<2, true>,
                      (const void *)pcl_ref_allreduce_simple<4, true>,
                      (const void *)pcl_ref_allreduce_simple<8, true>);
}

/* The scratch a message of `bytes` needs: the counters and 2 (nranks - 1) chunk slots. */
static inline uint64_t pcl_ref_allreduce_simple_need(int nranks, uint64_t bytes) {
  return PCL_REF_SIMPLE_DATA + 2ull * (uint64_t)(nranks - 1) * (bytes / (uint64_t)nranks);
}

/* half_bytes for messages up to max_bytes: half of what they need (one region over both halves),
 * a multiple of 16. */
static inline uint64_t pcl_ref_allreduce_simple_half_bytes(int nranks, uint64_t max_bytes) {
  return (pcl_ref_allreduce_simple_need(nranks, max_bytes) / 2 + 15) / 16 * 16;
}

/* One call of kernel k on `stream` (capturable). cudaErrorInvalidValue for a shape or size it
 * cannot run (bytes must split into nranks chunks of whole 16-byte units). bytes 0 runs the
 * syncs alone, the timing control that the other references' flag protocol is. */
static inline cudaError_t pcl_ref_simple_launch_k(const void *k, int nranks,
                                                  const pcl_ref_args_t *a, int blocks, int threads,
                                                  cudaStream_t stream) {
  if (nranks < 1 || !pcl_ref_shape_fits(nranks, a, blocks, threads, (uint64_t)nranks, 0) ||
      pcl_ref_allreduce_simple_need(nranks, a->bytes) > 2 * a->half_bytes)
    return cudaErrorInvalidValue;
  return pcl_ref_launch(k, a, blocks, threads, stream);
}

static inline cudaError_t pcl_ref_allreduce_simple_launch(int nranks, const pcl_ref_args_t *a,
                                                          int blocks, int threads,
                                                          cudaStream_t stream) {
  return pcl_ref_simple_launch_k(pcl_ref_allreduce_simple_kernel_of(nranks), nranks, a, blocks,
                                 threads, stream);
}

static inline cudaError_t pcl_ref_allreduce_simple_pipe_launch(int nranks, const pcl_ref_args_t *a,
                                                               int blocks, int threads,
                                                               cudaStream_t stream) {
  return pcl_ref_simple_launch_k(pcl_ref_allreduce_simple_pipe_kernel_of(nranks), nranks, a, blocks,
                                 threads, stream);
}

#endif
