/* SPDX-License-Identifier: MIT
 * planccl-refbench's reference: a hand-written one-phase LL16 allreduce (fp32 sum, 2/4/8 ranks),
 * the shipped ll1 plans' algorithm without an interpreter. Bench-only; no user call runs it. */
#ifndef PCL_REF_ALLREDUCE_CUH
#define PCL_REF_ALLREDUCE_CUH

#include <stdint.h>
#include <cuda_runtime.h>
#include "packet.cuh"
#ifdef PCL_KPROF
#include "exec_end.cuh" /* the plan kernels' phase timers, so both sides are timed alike */
#define PCL_REF_PROF(x) x
#else
#define PCL_REF_PROF(x)
#endif

#define PCL_REF_MAX_RANKS 8
/* Flag slots per rank: the largest grid the reference accepts (>= PCL_PLAN_MAX_BLOCKS). */
#define PCL_REF_MAX_SLOTS 256
#define PCL_REF_ERR_TIMEOUT 1u

/* Everything the kernel touches comes from here: no program, no shared memory.
 *
 * Scratch of rank r (2 * half_bytes, zeroed before the first call): half h = flag & 1 starts at
 * h * half_bytes; inside it, sender s's packets of the whole message start at s * 2 * bytes (one
 * 16-byte LL16 packet per 8 payload bytes; slot r itself is unused). So half_bytes must be at
 * least nranks * 2 * bytes. The half offset is a constant (not derived from bytes) so calls of
 * different sizes with the same parity share a half and never overlap the other one. */
typedef struct {
  const void *in;                   /* this rank's input, `bytes` bytes (may equal out: in-place) */
  void *out;                        /* this rank's output */
  uint64_t bytes;                   /* multiple of 16 */
  char *scratch[PCL_REF_MAX_RANKS]; /* [s] = rank s's scratch as this device addresses it
                                       (own included: [rank] is where peers write to us) */
  uint64_t half_bytes;
  uint64_t *flags; /* PCL_REF_MAX_SLOTS slots of this rank, device memory, zeroed once */
  uint32_t *error; /* device word: PCL_REF_ERR_TIMEOUT once any spin gave up */
  uint64_t timeout_ns;
  int rank;
#ifdef PCL_KPROF
  pcl_kprof_t *prof; /* block 0's phases (ready, puts, reduce, tail), as the plan kernels' */
#endif
} pcl_ref_args_t;

/* LL16 packets and the global timer: the executor's own primitives (kernels/packet.cuh), so the
 * reference and the plan store and poll packets with the same instructions. */

/* Slow path of a packet wait: bounded by timeout_ns (globaltimer, checked every 1024 polls).
 * On timeout, or when another thread already recorded an error, it records the error (first
 * one wins), marks this thread dead (later waits give up at once, so a broken call ends in one
 * timeout, not one per packet) and returns garbage: the kernel still ends and the host reports
 * the error word. Inlined: for small messages most packets are not there at the first look, so
 * this is the hot path, and `dead` stays in a register. */
static __device__ __forceinline__ uint2 pcl_ref_ll16_spin(const void *p, uint32_t flag,
                                                          uint32_t *error, uint64_t timeout_ns,
                                                          int &dead) {
  uint2 v = make_uint2(0, 0);
  if (dead)
    return v;
  const uint64_t t0 = pcl_kglobaltimer();
  for (uint32_t n = 1;; n++) {
    if (pcl_ll16_read(p, flag, &v))
      return v;
    if ((n & 1023u) == 0 &&
        (*(volatile uint32_t *)error != 0 || pcl_kglobaltimer() - t0 > timeout_ns)) {
      atomicCAS((unsigned int *)error, 0u, PCL_REF_ERR_TIMEOUT);
      dead = 1;
      return v;
    }
  }
}

/* Flag protocol (graph-safe, lock-step across ranks, no atomics, no last-block election):
 * every rank owns PCL_REF_MAX_SLOTS 64-bit slots, all equal (0) before its first call.
 *   start: block b reads slot[b]; the call's flag is f = slot[b] + 1 (its low 32 bits go into
 *          the packets, its parity picks the scratch half);
 *   end:   after __syncthreads, block b writes f to every slot j < MAX_SLOTS with
 *          j % gridDim.x == b.
 * Invariant: between calls all slots are equal. Given it, every block of a call computes the
 * same f. Slot b (b < gridDim.x) is written only by block b (b % gridDim.x == b), and only after
 * all of block b's threads have read it (the __syncthreads), so no read in this call sees a
 * write of this call. Every j < MAX_SLOTS has exactly one writer (block j % gridDim.x), so at
 * the end all slots hold f again: the invariant holds for the next call whatever ITS grid size
 * (<= MAX_SLOTS). Calls of one rank are ordered by its stream, so call k+1 reads what call k
 * wrote. Nothing on the host touches the slots after zeroing them, so CUDA graph replays
 * advance the flag exactly like eager launches; all ranks make the same calls, so their flags
 * stay equal call by call.
 *
 * Double scratch: call k writes peers' half k & 1 while they may still be reading call k-1 from
 * the other half. A rank can only start call k+2 (same half as k) after its call k+1 finished,
 * which needed every peer's call-k+1 packets, which every peer block wrote after its call k
 * kernel had ended (stream order): so nobody still reads half k & 1 when call k+2 overwrites
 * it, and stale packets there carry flag k, never k+2. (This needs every call to wait for
 * something, hence bytes > 0: a run of empty calls would let one rank race ahead.)
 *
 * Work split: block b owns the contiguous 16-byte-unit range of pcl_plan_tbg_slice (balanced,
 * the first `remainder` blocks one unit longer), as the plans' tbg_info slicing gives it; the
 * same block of every rank owns the same range, so block b of a rank waits only for block b of
 * its peers. Inside a block, thread t handles 8-byte payload words t, t + blockDim.x, ... in
 * both phases, the interpreter's granularity (one LL16 packet per word).
 *
 * In place is safe: a thread reads input word i (phase 1 and 2) before writing output word i,
 * and no other thread of any rank touches word i of this rank's buffers. */
template <int NR>
/* __grid_constant__: a.scratch is indexed with the runtime rank; without it nvcc would copy the
 * whole argument block into every thread's local memory to index it. */
__global__ void __launch_bounds__(1024)
    pcl_ref_allreduce_ll16(const __grid_constant__ pcl_ref_args_t a) {
  PCL_REF_PROF(PCL_KPROF_ENTRY);
  const uint32_t b = blockIdx.x, nb = gridDim.x;
  const uint64_t f64 = *(volatile const uint64_t *)&a.flags[b] + 1;
  const uint32_t flag = (uint32_t)f64;
  const uint64_t half = (f64 & 1u) ? a.half_bytes : 0;
  const uint32_t units = (uint32_t)(a.bytes / 16), base = units / nb, rem = units % nb;
  const uint32_t w0 = 2u * (b * base + (b < rem ? b : rem)); /* first 8-byte word of the slice */
  const uint32_t nw = 2u * (base + (b < rem ? 1u : 0u));
  const uint64_t slot = 2 * a.bytes; /* packet bytes of one sender */
  const int me = a.rank;
  const uint2 *in = (const uint2 *)a.in + w0;
  uint2 *out = (uint2 *)a.out + w0;

  /* Phase 1: this slice of the input, as packets, into slot `me` of every peer's scratch,
   * visiting peers from me + 1 on (as the plans do) so ranks do not all hit one peer at once. */
  char *dst[NR];
#pragma unroll
  for (int k = 1; k < NR; k++)
    dst[k] = a.scratch[(me + k) % NR] + half + (uint64_t)me * slot + (uint64_t)w0 * 16;
  PCL_REF_PROF(PCL_KPROF_STAMP(prof_ready));
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    const uint2 v = in[i];
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, v, flag);
  }
  PCL_REF_PROF(prof_op[0] = clock64());

  /* Phase 2: out = x0 + x1 + ... + x(NR-1) in rank order (what the N-rank plans compute, so
   * every rank gets bit-identical sums), own term from the input, the others from the packets
   * in our own scratch. All peers' packets are loaded first, then the missing ones awaited, so
   * their latencies overlap. */
  const char *mine = a.scratch[me] + half + (uint64_t)w0 * 16;
  int dead = 0;
  for (uint32_t i = threadIdx.x; i < nw; i += blockDim.x) {
    uint2 v[NR];
    int ok[NR];
#pragma unroll
    for (int s = 0; s < NR; s++) {
      if (s == me) {
        v[s] = in[i];
        ok[s] = 1;
      } else {
        ok[s] = pcl_ll16_read(mine + (uint64_t)s * slot + (uint64_t)i * 16, flag, &v[s]);
      }
    }
#pragma unroll
    for (int s = 0; s < NR; s++)
      if (!ok[s])
        v[s] = pcl_ref_ll16_spin(mine + (uint64_t)s * slot + (uint64_t)i * 16, flag, a.error,
                                 a.timeout_ns, dead);
    float x = __uint_as_float(v[0].x), y = __uint_as_float(v[0].y);
#pragma unroll
    for (int s = 1; s < NR; s++) {
      x += __uint_as_float(v[s].x);
      y += __uint_as_float(v[s].y);
    }
    out[i] = make_uint2(__float_as_uint(x), __float_as_uint(y));
  }
  PCL_REF_PROF(prof_op[1] = clock64());

  /* Advance the flag (protocol above): the barrier orders every thread's read of slot[b] before
   * the write of slot[b]; the slots are read again only by the next kernel of this stream. */
  __syncthreads();
  for (uint32_t j = b + threadIdx.x * nb; j < PCL_REF_MAX_SLOTS; j += blockDim.x * nb)
    a.flags[j] = f64;
  PCL_REF_PROF(PCL_KPROF_EXIT(2));
}

/* The launch floor of the same shape: an empty kernel. */
static __global__ void pcl_ref_empty_kernel(void) {}

/* ---- host side ---- */

/* Loads every kernel of this header on the current device. Lazy module loading on first launch
 * can wait behind a spinning kernel of another rank on the same device, so load before any. */
static inline cudaError_t pcl_ref_load(void) {
  struct cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, (const void *)pcl_ref_allreduce_ll16<2>);
  if (e == cudaSuccess)
    e = cudaFuncGetAttributes(&attr, (const void *)pcl_ref_allreduce_ll16<4>);
  if (e == cudaSuccess)
    e = cudaFuncGetAttributes(&attr, (const void *)pcl_ref_allreduce_ll16<8>);
  if (e == cudaSuccess)
    e = cudaFuncGetAttributes(&attr, (const void *)pcl_ref_empty_kernel);
  return e;
}

static inline const void *pcl_ref_kernel_of(int nranks) {
  switch (nranks) {
  case 2:
    return (const void *)pcl_ref_allreduce_ll16<2>;
  case 4:
    return (const void *)pcl_ref_allreduce_ll16<4>;
  case 8:
    return (const void *)pcl_ref_allreduce_ll16<8>;
  default:
    return NULL;
  }
}

/* Scratch bytes (both halves) one rank needs for messages up to max_bytes. */
static inline uint64_t pcl_ref_scratch_bytes(int nranks, uint64_t max_bytes) {
  return 2ull * (uint64_t)nranks * 2ull * max_bytes;
}

/* Blocks of `threads` threads of the nranks reference that fit one SM at once (0 on error). */
static inline int pcl_ref_blocks_per_sm(int nranks, int threads) {
  const void *k = pcl_ref_kernel_of(nranks);
  int n = 0;
  if (k == NULL ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* One call on `stream` (capturable). cudaErrorInvalidValue for a shape or size it cannot run.
 * bytes 0 runs the flag protocol alone (a timing control): such calls move no data, so the
 * double-scratch argument, which needs every call to wait for its peers, is not needed. */
static inline cudaError_t pcl_ref_allreduce_launch(int nranks, const pcl_ref_args_t *a, int blocks,
                                                   int threads, cudaStream_t stream) {
  if (blocks < 1 || blocks > PCL_REF_MAX_SLOTS || threads < 32 || threads > 1024 ||
      a->bytes % 16 != 0 || a->bytes / 16 > UINT32_MAX / 2 || a->rank < 0 || a->rank >= nranks ||
      (uint64_t)nranks * 2 * a->bytes > a->half_bytes)
    return cudaErrorInvalidValue;
  switch (nranks) {
  case 2:
    pcl_ref_allreduce_ll16<2><<<blocks, threads, 0, stream>>>(*a);
    break;
  case 4:
    pcl_ref_allreduce_ll16<4><<<blocks, threads, 0, stream>>>(*a);
    break;
  case 8:
    pcl_ref_allreduce_ll16<8><<<blocks, threads, 0, stream>>>(*a);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

static inline cudaError_t pcl_ref_empty_launch(int blocks, int threads, cudaStream_t stream) {
  pcl_ref_empty_kernel<<<blocks, threads, 0, stream>>>();
  return cudaGetLastError();
}

/* The same empty kernel with programmatic stream serialisation: the floor of a planned call
 * launched with PLANCCL_PDL=1 (the launch overlaps the previous kernel's end). */
static inline cudaError_t pcl_ref_empty_launch_pdl(int blocks, int threads, cudaStream_t stream) {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, pcl_ref_empty_kernel);
}

#endif
