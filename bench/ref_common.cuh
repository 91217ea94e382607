/* SPDX-License-Identifier: MIT
 * What planccl-refbench's hand-written LL16 references (bench/ref_<collective>.cuh) share:
 * arguments, flag protocol, work split, packet waits, the rooted collectives' acks. */
#ifndef PCL_REF_COMMON_CUH
#define PCL_REF_COMMON_CUH

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

/* Everything a reference kernel touches comes from here: no program, no shared memory.
 *
 * bytes is the message as planccl's registry counts it, in = out = bytes for allreduce,
 * broadcast and reduce; for allgather the output (the input is one chunk = bytes / nranks), for
 * reduce-scatter the input (the output is one chunk). What a sender puts to one peer is the
 * message (one-phase allreduce, broadcast, reduce) or one chunk (the others): `slot` bytes of
 * LL16 packets, one 16-byte packet per 8 payload bytes, so slot = 2 * that payload.
 *
 * Scratch of rank r (2 * half_bytes, zeroed before the first call): half h = flag & 1 starts at
 * h * half_bytes; inside it, sender s's packets start at s * slot (slot r itself is unused). So
 * half_bytes must be at least nranks * slot for the largest message (the two-phase allreduce
 * keeps a second such region, the rooted collectives acks: see their headers). The half offset
 * is a constant (not derived from bytes) so calls of different sizes with the same parity share
 * a half and never overlap the other one. */
typedef struct {
  const void *in; /* this rank's input (in place: inside out, see each header) */
  void *out;      /* this rank's output */
  uint64_t bytes; /* multiple of 16 (allgather, reduce-scatter, allreduce2: 16 * nranks) */
  char *scratch[PCL_REF_MAX_RANKS]; /* [s] = rank s's scratch as this device addresses it
                                       (own included: [rank] is where peers write to us) */
  uint64_t half_bytes;
  uint64_t *flags; /* PCL_REF_MAX_SLOTS slots of this rank, device memory, zeroed once */
  uint32_t *error; /* device word: PCL_REF_ERR_TIMEOUT once any spin gave up */
  uint64_t timeout_ns;
  int rank;
#ifdef PCL_KPROF
  pcl_kprof_t *prof; /* block 0's phases (ready, puts, second phase, tail), as the plans' */
#endif
} pcl_ref_args_t;

/* LL16 packets and the global timer: the executor's own primitives (kernels/packet.cuh), so the
 * references and the plans store and poll packets with the same instructions. */

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

/* One packet: the first look here, the rest on the slow path (the receivers of a single sender,
 * and the acks). */
static __device__ __forceinline__ uint2 pcl_ref_wait1(const void *p, uint32_t flag,
                                                      const pcl_ref_args_t &a, int &dead) {
  uint2 v;
  if (pcl_ll16_read(p, flag, &v))
    return v;
  return pcl_ref_ll16_spin(p, flag, a.error, a.timeout_ns, dead);
}

/* Word i of every peer's packets in our scratch into v[s] (s != me; v[me] = own). `mine` is
 * where sender 0's packets of this block's slice start, `slot` the bytes between senders. All
 * loads are issued before any wait, so their latencies overlap; then the missing ones are
 * awaited. Once unrolled every index of v is a constant, so v stays in registers. */
template <int NR>
static __device__ __forceinline__ void pcl_ref_recv(uint2 (&v)[NR], const char *mine, uint64_t slot,
                                                    uint32_t i, int me, uint2 own, uint32_t flag,
                                                    const pcl_ref_args_t &a, int &dead) {
  int ok[NR];
#pragma unroll
  for (int s = 0; s < NR; s++) {
    if (s == me) {
      v[s] = own;
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
 * stay equal call by call. The slots are shared by every reference kernel of a rank, so calls
 * of different collectives on one rank stay in step too.
 *
 * Double scratch: call k writes peers' half k & 1 while they may still be reading call k-1 from
 * the other half. A rank can only start call k+2 (same half as k) after its call k+1 finished,
 * which needed every peer's call-k+1 packets, which every peer block wrote after its call k
 * kernel had ended (stream order): so nobody still reads half k & 1 when call k+2 overwrites
 * it, and stale packets there carry flag k, never k+2. (This needs every call to wait for
 * something, hence bytes > 0: a run of empty calls would let one rank race ahead.) */
static __device__ __forceinline__ uint64_t pcl_ref_flag_begin(const pcl_ref_args_t &a) {
  return *(volatile const uint64_t *)&a.flags[blockIdx.x] + 1;
}

/* The scratch half of the call whose 64-bit flag is f64. */
static __device__ __forceinline__ uint64_t pcl_ref_half(const pcl_ref_args_t &a, uint64_t f64) {
  return (f64 & 1u) ? a.half_bytes : 0;
}

/* Acks (the rooted collectives, where ranks of one side only send and so would wait for nothing:
 * such a rank could run two calls ahead and overwrite packets of the same scratch half that a
 * peer has not read yet, so the double-scratch argument above would fail). Once block b of a
 * receiver has read the call's packets, it stores one LL16 packet of the call's flag into the
 * sender's scratch, and block b of the sender waits for it before it ends. Acks lie in the last
 * PCL_REF_ACK_BYTES of each half (so a half must hold the packets and them), one packet per
 * (acking rank, block); a stale one carries an older flag. Calls of 0 bytes (the timing control)
 * neither send nor wait for them: they move no packets. */
#define PCL_REF_ACK_BYTES ((uint64_t)PCL_REF_MAX_RANKS * PCL_REF_MAX_SLOTS * 16)

static __device__ __forceinline__ char *pcl_ref_ack_at(const pcl_ref_args_t &a, int owner,
                                                       uint64_t half, int from) {
  return a.scratch[owner] + half + a.half_bytes - PCL_REF_ACK_BYTES +
         ((uint64_t)from * PCL_REF_MAX_SLOTS + blockIdx.x) * 16;
}

/* This block's ack to rank `to`. The caller's __syncthreads comes first: past it every thread
 * of the block has its packets in registers, so nothing the sender writes next can reach them. */
static __device__ __forceinline__ void pcl_ref_ack(const pcl_ref_args_t &a, uint64_t half, int to,
                                                   uint32_t flag) {
  pcl_ll16_store(pcl_ref_ack_at(a, to, half, a.rank), make_uint2(0, 0), flag);
}

/* Waits for rank from's ack to this block (in our own scratch). */
static __device__ __forceinline__ void pcl_ref_ack_wait(const pcl_ref_args_t &a, uint64_t half,
                                                        int from, uint32_t flag, int &dead) {
  (void)pcl_ref_wait1(pcl_ref_ack_at(a, a.rank, half, from), flag, a, dead);
}

/* Advances the flag (protocol above): the barrier orders every thread's read of slot[b] before
 * the write of slot[b]; the slots are read again only by the next kernel of this stream. */
static __device__ __forceinline__ void pcl_ref_flag_end(const pcl_ref_args_t &a, uint64_t f64) {
  const uint32_t b = blockIdx.x, nb = gridDim.x;
  __syncthreads();
  for (uint32_t j = b + threadIdx.x * nb; j < PCL_REF_MAX_SLOTS; j += blockDim.x * nb)
    a.flags[j] = f64;
}

/* Work split: of a range of `units` 16-byte units (the message, or one chunk where each op of
 * the plans covers a chunk), block b owns the contiguous slice of pcl_plan_tbg_slice (balanced,
 * the first `remainder` blocks one unit longer), as the plans' tbg_info slicing gives it; the
 * same block of every rank owns the same slice, so block b of a rank waits only for block b of
 * its peers. Inside a block, thread t handles 8-byte payload words t, t + blockDim.x, ... of the
 * slice in every phase, the interpreter's granularity (one LL16 packet per word). Writes the
 * slice's first word and its length in words. */
static __device__ __forceinline__ void pcl_ref_slice(uint32_t units, uint32_t *w0, uint32_t *nw) {
  const uint32_t b = blockIdx.x, nb = gridDim.x, base = units / nb, rem = units % nb;
  *w0 = 2u * (b * base + (b < rem ? b : rem));
  *nw = 2u * (base + (b < rem ? 1u : 0u));
}

/* What a call of a reference kernel starts from: its flag (protocol above), its scratch half,
 * and this block's slice of each of `parts` equal parts of the message (the chunks; 1: the whole
 * message), a sender's packets of one part filling a slot of twice its bytes. */
typedef struct {
  uint64_t f64;    /* the call's flag */
  uint32_t flag;   /* its low 32 bits, which the packets carry */
  uint64_t half;   /* where the call's scratch half starts */
  uint64_t slot;   /* packet bytes of one sender */
  uint32_t cw;     /* 8-byte words of one part: part p of a buffer starts p * cw words in */
  uint32_t w0, nw; /* this block's slice of every part, in words (pcl_ref_slice) */
} pcl_ref_call_t;

static __device__ __forceinline__ pcl_ref_call_t pcl_ref_call_begin(const pcl_ref_args_t &a,
                                                                    uint32_t parts) {
  pcl_ref_call_t c;
  c.f64 = pcl_ref_flag_begin(a);
  c.flag = (uint32_t)c.f64;
  c.half = pcl_ref_half(a, c.f64);
  const uint64_t part = a.bytes / parts;
  c.slot = 2 * part;
  c.cw = (uint32_t)(part / 8);
  pcl_ref_slice((uint32_t)(part / 16), &c.w0, &c.nw);
  return c;
}

/* ---- phases several references share (in is this block's slice of chunk 0 of the input, out
 * that of the output; chunk p lies cw 8-byte words further) ---- */

/* dst[k] (0 < k < NR): where this block's packets as sender `me` go in the scratch of peer
 * (me + k) % NR, `off` bytes in (the half, plus a region). Peers are visited from me + 1 on (as
 * the plans do) so that ranks do not all write to one peer at once. */
template <int NR>
static __device__ __forceinline__ void pcl_ref_peer_slots(const pcl_ref_args_t &a,
                                                          const pcl_ref_call_t &c, uint64_t off,
                                                          char *(&dst)[NR]) {
  const int me = a.rank;
#pragma unroll
  for (int k = 1; k < NR; k++)
    dst[k] = a.scratch[(me + k) % NR] + off + (uint64_t)me * c.slot + (uint64_t)c.w0 * 16;
}

/* The one-shot puts: word i of this slice of `in`, as a packet, into every peer's scratch half
 * (pcl_ref_peer_slots); where `copy` is not NULL, into copy[i] as well (the plans' local copy). */
template <int NR>
static __device__ __forceinline__ void
pcl_ref_put_all(const pcl_ref_args_t &a, const pcl_ref_call_t &c, const uint2 *in, uint2 *copy) {
  char *dst[NR];
  pcl_ref_peer_slots<NR>(a, c, c.half, dst);
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    const uint2 v = in[i];
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, v, c.flag);
    if (copy != NULL)
      copy[i] = v;
  }
}

/* Reduce-scatter's puts: word i of this slice of input chunk p, as a packet, into peer p's
 * scratch half (pcl_ref_peer_slots). A word's loads are all issued before its stores, which the
 * compiler may not reorder past them. */
template <int NR>
static __device__ __forceinline__ void
pcl_ref_put_chunks(const pcl_ref_args_t &a, const pcl_ref_call_t &c, const uint2 *in) {
  char *dst[NR];
  pcl_ref_peer_slots<NR>(a, c, c.half, dst);
  uint32_t src[NR]; /* chunk p's offset in words: 32 bits (pcl_ref_shape_fits) keep registers */
#pragma unroll
  for (int k = 1; k < NR; k++)
    src[k] = (uint32_t)((a.rank + k) % NR) * c.cw;
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    uint2 v[NR];
#pragma unroll
    for (int k = 1; k < NR; k++)
      v[k] = in[src[k] + i];
#pragma unroll
    for (int k = 1; k < NR; k++)
      pcl_ll16_store(dst[k] + (uint64_t)i * 16, v[k], c.flag);
  }
}

/* own + the peers' terms v[s] (s != me) in rank order: the order in which the plans' packet
 * reductions list their sources (own input first, then scratch by sender), so sums match theirs
 * bit for bit. own is passed apart: v[me] would be a runtime index, putting v in local memory. */
template <int NR>
static __device__ __forceinline__ uint2 pcl_ref_sum_own_first(uint2 own, const uint2 (&v)[NR],
                                                              int me) {
  float x = __uint_as_float(own.x), y = __uint_as_float(own.y);
#pragma unroll
  for (int s = 0; s < NR; s++)
    if (s != me) {
      x += __uint_as_float(v[s].x);
      y += __uint_as_float(v[s].y);
    }
  return make_uint2(__float_as_uint(x), __float_as_uint(y));
}

/* Allgather's receive: every peer's packets of this slice from `mine` (sender s at s * slot;
 * pcl_ref_recv: all loads first, then the waits) into that peer's chunk of the output. */
template <int NR>
static __device__ __forceinline__ void pcl_ref_gather(const pcl_ref_args_t &a,
                                                      const pcl_ref_call_t &c, uint2 *out,
                                                      const char *mine, int &dead) {
  const int me = a.rank;
  for (uint32_t i = threadIdx.x; i < c.nw; i += blockDim.x) {
    uint2 v[NR];
    pcl_ref_recv<NR>(v, mine, c.slot, i, me, make_uint2(0, 0), c.flag, a, dead);
#pragma unroll
    for (int s = 0; s < NR; s++)
      if (s != me)
        out[(uint64_t)s * c.cw + i] = v[s];
  }
}

/* The launch floor of the same shape: an empty kernel. */
static __global__ void pcl_ref_empty_kernel(void) {}

/* ---- host side ---- */

/* A reference's kernel for 2, 4 or 8 ranks, NULL for other counts. */
typedef const void *(*pcl_ref_kernel_of_t)(int nranks);

/* What a kernel_of returns: of its kernel's instances for 2, 4 and 8 ranks, nranks' one. */
static inline const void *pcl_ref_pick(int nranks, const void *k2, const void *k4, const void *k8) {
  return nranks == 2 ? k2 : nranks == 4 ? k4 : nranks == 8 ? k8 : NULL;
}

/* Loads a reference's kernels (2, 4, 8 ranks) and the empty kernel on the current device. Lazy
 * module loading on first launch can wait behind a spinning kernel of another rank on the same
 * device, so load before any. */
static inline cudaError_t pcl_ref_load(pcl_ref_kernel_of_t kernel_of) {
  struct cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, (const void *)pcl_ref_empty_kernel);
  for (int n = 2; n <= PCL_REF_MAX_RANKS && e == cudaSuccess; n *= 2)
    e = cudaFuncGetAttributes(&attr, kernel_of(n));
  return e;
}

/* Blocks of `threads` threads of kernel k that fit one SM at once (0 on error). */
static inline int pcl_ref_blocks_per_sm(const void *k, int threads) {
  int n = 0;
  if (k == NULL ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* 1 when a call of the shape can run: a grid the flag slots cover, a block size the kernels
 * take, a message of whole 16-byte units per `parts` (the chunks) whose 8-byte words 32 bits
 * count, a rank in range, and a scratch half of at least `need` bytes. */
static inline int pcl_ref_shape_fits(int nranks, const pcl_ref_args_t *a, int blocks, int threads,
                                     uint64_t parts, uint64_t need) {
  return blocks >= 1 && blocks <= PCL_REF_MAX_SLOTS && threads >= 32 && threads <= 1024 &&
         a->bytes % (16 * parts) == 0 && a->bytes / 8 <= UINT32_MAX && a->rank >= 0 &&
         a->rank < nranks && need <= a->half_bytes;
}

/* The same for a half of nranks slots of `slot` bytes. */
static inline int pcl_ref_shape_ok(int nranks, const pcl_ref_args_t *a, int blocks, int threads,
                                   uint64_t parts, uint64_t slot) {
  return pcl_ref_shape_fits(nranks, a, blocks, threads, parts, (uint64_t)nranks * slot);
}

/* One call of kernel k (a reference's, for this rank count) on `stream`: what <<<>>> does,
 * through the kernel's address so every reference shares one launcher (capturable). */
static inline cudaError_t pcl_ref_launch(const void *k, const pcl_ref_args_t *a, int blocks,
                                         int threads, cudaStream_t stream) {
  if (k == NULL)
    return cudaErrorInvalidValue;
  void *args[1] = {(void *)a};
  return cudaLaunchKernel(k, dim3(blocks), dim3(threads), args, 0, stream);
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
