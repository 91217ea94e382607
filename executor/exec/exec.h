/* SPDX-License-Identifier: MIT
 * The executor: binds a parsed plan to a communicator's channels and buffers, builds the device
 * program once per (plan, message shape), and launches the interpreter kernel per call. */
#ifndef PCL_EXEC_H
#define PCL_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "kernel_abi.h"

#ifdef __cplusplus
extern "C" { /* plan.h has no C++ guard of its own */
#endif
#include "plan.h"

/* ---- host-side program building (pure CPU, no CUDA: unit-tested) ------------------------- */

/* What one rank's program is bound to, by gpu-level index of the plan (pcl_plan_gpu_t). */
typedef struct {
  const pcl_kmemchan_t *mem;   /* [gpu->n_channels[MEMORY]] */
  const pcl_kportchan_t *port; /* [gpu->n_channels[PORT]] (NULL when none) */
  const pcl_kremote_t *rbuf;   /* [gpu->n_rbufs] */
} pcl_exec_bind_t;

/* Facts about a built program that decide, per call, what it can run. Computed over EVERY rank
 * of the plan (not only this one) so all ranks decide alike. */
typedef struct {
  uint64_t pkt_or;    /* OR of packet operand offsets and sizes (LL16 needs % 8 == 0) */
  uint64_t red_or;    /* OR of reduce operand offsets and sizes (must be % element size) */
  int has_pkt_reduce; /* some rank reduces over packets */
  int has_reduce;
  int has_port;          /* some op uses a port channel */
  int remote_io;         /* some op addresses a peer's input/output buffer (zero-copy) */
  int port_io;           /* the proxy moves a local input/output buffer (it reads it by memory
                            id: needs registered buffers; pcl_plan_operand_by_proxy) */
  uint64_t scratch_half; /* largest scratch_half_bytes over the ranks */
} pcl_exec_shape_t;

/* Fills blocks[0 .. plan->max_blocks) for `rank` and layout `l` (tbg slicing and pipeline
 * iteration counts applied; blocks the rank lacks get nops = 0). bind may be NULL: channel and
 * remote tables stay zero (tests). ncclInvalidArgument with a WARN when a kernel limit is hit. */
ncclResult_t pcl_exec_build_blocks(const pcl_plan_t *plan, int rank, const pcl_plan_layout_t *l,
                                   const pcl_exec_bind_t *bind, pcl_kblock_t *blocks);

/* 1 when every op of the program is a packet op over memory channels (or a nop) with at most
 * PCL_KABI_LL_MAX_SRC sources: it can run on the LL fast-path kernel (kernels/exec_ll.cuh). */
int pcl_exec_ll_eligible(const pcl_kblock_t *blocks, int nblocks);

/* 1 when every op of the program is a plain op (copy, put, get, re, res, rre, rres) or a sync,
 * barrier, semaphore or pipeline op, none on a port channel, with at most PCL_KABI_MAX_OP_REFS
 * refs per side: it can run on the Simple kernel (kernels/exec_simple.cu). */
int pcl_exec_simple_eligible(const pcl_kblock_t *blocks, int nblocks);

/* Threads per block of a program's launches: the plan's, or for a program on the LL or EW
 * kernels (`fast`) at most their bound, PCL_KABI_LL_MAX_THREADS. Those kernels run every op as a
 * loop strided by blockDim, so a plan's result does not depend on its thread count. */
int pcl_exec_launch_threads(const pcl_plan_t *plan, int fast);

/* 1 when a program may run on the LL or EW kernels as far as threads go: its plan asks at most
 * their bound, or (MSCCL++'s plans ask 1024) none of its ranges is larger than one pass of the
 * plan's threads over 8-byte words. At the bound such a range takes two passes instead of one;
 * a larger range loses half its loads in flight: MSCCL++'s 2-block packet allreduce ran 2.2
 * times faster on the LL kernel at 1 KiB but 1.8 times slower at 1 MiB than on the interpreter
 * at 1024 threads (one H100). */
int pcl_exec_fast_threads_ok(const pcl_plan_t *plan, const pcl_kblock_t *blocks, int nblocks);

/* 1 when a program of the LL kernel runs on its wide form (PCL_KVAR_LL_WIDE) at the plan's own
 * thread count: the plan asks more than PCL_KABI_LL_MAX_THREADS, pcl_exec_fast_threads_ok
 * refuses the narrow form, and the plan reduces no packets (shape->has_pkt_reduce) or none of
 * this program's ranges passes 64 KiB (where the interpreter was measured faster). Otherwise such
 * a program runs on the interpreter. MSCCL++'s packet plans are 1024-thread plans; the
 * elementwise kernels have no wide form. */
int pcl_exec_ll_wide(const pcl_plan_t *plan, const pcl_exec_shape_t *shape,
                     const pcl_kblock_t *blocks, int nblocks);

/* Sets PCL_KBLOCK_FUSED_PPKT_REPKT (kernel_abi.h) on every block whose ops the LL kernel may run
 * as one fused pass, clears it elsewhere; returns how many blocks it set it on. */
int pcl_exec_mark_fused(pcl_kblock_t *blocks, int nblocks);

/* Writes the elementwise program of blocks[0 .. nblocks) into ew[0 .. nblocks) (kernel_abi.h,
 * pcl_kew_t) when EVERY block's ops provably run per element (executor/exec/exec_fuse.c): packet
 * ops over memory channels, one range size, ranges identical or disjoint, one plain result. scratch
 * and scratch_half: this rank's scratch base and odd-flag offset (0 without double scratch).
 * Returns the EW kernel's bound (2, 4 or 8 puts and terms), or 0 with `why` (may be NULL) naming
 * the first block that does not fit and the reason. */
int pcl_exec_ew_build(const pcl_kblock_t *blocks, int nblocks, uint64_t scratch,
                      uint64_t scratch_half, pcl_kew_t *ew, char *why, size_t why_len);

/* The same proof for blocks of several plain streams (allgather, reduce-scatter, broadcast and
 * the like): writes the EWX program (kernel_abi.h, pcl_kewx_t) of every block into ewx[0 ..
 * nblocks) and returns the EWX kernel's bound (2, 4 or 8 puts and terms), or 0 with `why` as
 * pcl_exec_ew_build's. */
int pcl_exec_ewx_build(const pcl_kblock_t *blocks, int nblocks, uint64_t scratch,
                       uint64_t scratch_half, pcl_kewx_t *ewx, char *why, size_t why_len);

/* Packs blocks[0 .. nblocks) as the kernel expects them (kernel_abi.h, the packed program) into
 * out, which holds nblocks * pcl_exec_pack_stride(blocks, nblocks) bytes. */
uint32_t pcl_exec_pack_stride(const pcl_kblock_t *blocks, int nblocks);
void pcl_exec_pack_blocks(const pcl_kblock_t *blocks, int nblocks, uint32_t stride, void *out);

/* Shape facts for (in_bytes, out_bytes) over all ranks; ncclInvalidArgument if not runnable. */
ncclResult_t pcl_exec_shape(const pcl_plan_t *plan, int rank, uint64_t in_bytes, uint64_t out_bytes,
                            pcl_exec_shape_t *out);

/* Any root by relabelling (pcl_plan_root_shift): the plan rank that rank `rank` runs under
 * shift s, and the communicator rank behind plan rank q. */
static inline int pcl_exec_vrank(int rank, int s, int n) {
  return (rank - s + n) % n;
}
static inline int pcl_exec_prank(int q, int s, int n) {
  return (q + s) % n;
}

/* pcl_plan_op_type_t -> pcl_kop_type_t; -1 for ops the kernel lacks (NVLS). */
int pcl_exec_kop_of(int plan_op);

/* ---- the executor context (one per communicator) -------------------------------------- */

typedef struct pcl_exec_ctx pcl_exec_ctx_t;
struct pcl_memchan;
struct pcl_memchan_buf;
struct pcl_portchan;

typedef struct {
  int cuda_dev;
  int rank, nranks;
  /* Memory channels to every peer (transport/memchan.h; its nchannels must cover the most
   * channels a plan opens to one peer). NULL: only plans without memory channels/remote buffers
   * can be bound. The plan's k-th memory channel to peer p uses memchan channel k of p. */
  struct pcl_memchan *memchan;
  /* Port channels (transport/portchan.h) on the same bootstrap, or NULL: plans with port
   * channels are then refused. The plan's k-th port channel to peer p uses portchan channel k of
   * p; its scratch is `scratch`. */
  struct pcl_portchan *portchan;
  void *scratch;        /* device scratch shared by all plans (exposed through memchan) */
  size_t scratch_bytes; /* double-scratch plans use halves of scratch_bytes / 2 (a constant) */
  int64_t timeout_s;    /* kernel spin timeout, 0 = none (pcl_param_timeout_s()) */
  /* The most ranks of this communicator that share one GPU (alike on every rank; 0 means 1).
   * Their kernels spin on each other, so a plan runs only when that many grids of it fit on the
   * device at once (occupancy API); otherwise it is refused, never launched into a hang.
   * Kernels of OTHER communicators running at the same time are not counted. */
  int dev_ranks;
  int interp_only; /* 1: every plan on the interpreter (as PLANCCL_LL_KERNEL=0) */
  /* The flag the slots start at, as if that many calls had run (0: a new communicator). Tests
   * start just below 2^32 to cross the 32-bit wrap of the packets' flag (pcl_kflag32). */
  uint64_t first_flag;
} pcl_exec_config_t;

/* Allocates the per-communicator device state (flag, barriers), the host-mapped error and abort
 * words, a side stream for building programs, and loads every kernel variant (cuda_dev). */
ncclResult_t pcl_exec_ctx_create(const pcl_exec_config_t *cfg, pcl_exec_ctx_t **out);
/* Frees programs and state; the caller synchronised or aborted the kernels. NULL is ok. */
void pcl_exec_ctx_destroy(pcl_exec_ctx_t *ctx);

/* A call's exact user buffers registered collectively (the GPU tests; the NCCL API registers
 * windows, below): needed by plans that
 * read or write a PEER's input/output (zero-copy; allreduce_simple_2, reduce_2, reduce_tbg_2) and
 * by port-channel plans whose puts start from or land in input/output. Registered with the memory
 * channels and, when the context has them, the port channels. Collective over the channels'
 * bootstrap: every rank calls it in the same order. Input and output are registered apart even
 * where they coincide, because they may coincide on some ranks only (in-place reduce-scatter and
 * allgather on rank 0): every rank makes the same number of exchanges whatever its pointers. */
typedef struct pcl_exec_userbuf pcl_exec_userbuf_t;
ncclResult_t pcl_exec_userbuf_create(pcl_exec_ctx_t *ctx, void *in, size_t in_bytes, void *out,
                                     size_t out_bytes, pcl_exec_userbuf_t **ub);
void pcl_exec_userbuf_destroy(pcl_exec_userbuf_t *ub);
/* 1 for a view inside windows (pcl_exec_userbuf_view), 0 for an exact registration or NULL:
 * plans may run on one and not the other (port channels), so callers decide them apart. */
int pcl_exec_userbuf_is_view(const pcl_exec_userbuf_t *ub);

/* Windows (ncclCommWindowRegister): [ptr, ptr + bytes) exchanged once, collectively over the
 * memory channels' bootstrap, every rank in the same order (a rank with nothing to register
 * passes NULL and still takes part). Calls whose buffers lie inside windows then run zero-copy
 * plans through a view, with no exchange: NCCL's symmetric contract, every rank passing its
 * buffers at the same offsets of its windows. Memory channels only (port-channel plans are
 * refused on views). Destroy every view of a window before the window. */
typedef struct pcl_exec_window pcl_exec_window_t;
ncclResult_t pcl_exec_window_create(pcl_exec_ctx_t *ctx, void *ptr, size_t bytes,
                                    pcl_exec_window_t **win);
void pcl_exec_window_destroy(pcl_exec_window_t *win);
/* 1 when [ptr, ptr + bytes) lies inside the window. */
int pcl_exec_window_holds(const pcl_exec_window_t *win, const void *ptr, uint64_t bytes);
/* A view of (in, out) inside windows, local and cheap; destroy it with pcl_exec_userbuf_destroy.
 * Rank r's input is at r's window base + (in - my base) + (r - my rank) * in_step (likewise
 * output): step 0, except where NCCL places a rank's buffer by rank (in-place allgather's input,
 * in-place reduce-scatter's output, whose step is their size). ncclInvalidArgument (WARNed) when
 * a buffer is not inside its window or a peer's copy would run past the peer's window. */
ncclResult_t pcl_exec_userbuf_view(pcl_exec_ctx_t *ctx, pcl_exec_window_t *win_in, const void *in,
                                   uint64_t in_bytes, uint64_t in_step, pcl_exec_window_t *win_out,
                                   const void *out, uint64_t out_bytes, uint64_t out_step,
                                   pcl_exec_userbuf_t **ub);
/* A view at given offsets, local and cheap: rank r's input is [r's window base + in_off[r],
 * + in_bytes) (likewise output), in_off and out_off [nranks] each (copied). What automatic
 * registration builds, where each rank's buffer lies wherever its allocator put it; the windows
 * may be one. ncclInvalidArgument (WARNed) when some rank's copy runs past its window. */
ncclResult_t pcl_exec_userbuf_view_at(pcl_exec_ctx_t *ctx, pcl_exec_window_t *win_in,
                                      const uint64_t *in_off, uint64_t in_bytes,
                                      pcl_exec_window_t *win_out, const uint64_t *out_off,
                                      uint64_t out_bytes, pcl_exec_userbuf_t **ub);

typedef struct {
  const void *in;
  void *out;
  uint64_t in_bytes, out_bytes; /* pcl_plan_buffer_bytes of the message size */
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int root;      /* broadcast, reduce: the root (pcl_plan_root_shift; avg scales only its output) */
  int force_ll8; /* 1: LL8 packets even where LL16 fits */
  const pcl_exec_userbuf_t *ub; /* registered buffers, or NULL (zero-copy plans refused) */
} pcl_exec_args_t;

/* 1 when (plan, args) can run here: dtype/op supported, sizes split, element and packet
 * alignment, scratch large enough, zero-copy only with ub, a root the plan can be relabelled
 * to. An unregistered allreduce, broadcast or reduce whose scratch would not fit runs as
 * consecutive calls of the plan on segments of its buffers (pcl_plan_segment_bytes): prepare,
 * kernel and launch below do the same. Deterministic on all ranks given the same (plan, sizes,
 * dtype, op, root, ub != NULL). Builds the program of a new shape (allocates); programs are cached
 * per root as well. */
int pcl_exec_supported(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan, const pcl_exec_args_t *a);

/* How many consecutive calls of the plan run this call (1: not segmented; see above), each of
 * *seg_bytes (may be NULL) but the last, which holds the rest. Each segment reduces in its own
 * chunks' order, so a float result may differ in rounding from the unsegmented plan's. */
uint64_t pcl_exec_segments(const pcl_exec_ctx_t *ctx, const pcl_plan_t *plan,
                           const pcl_exec_args_t *a, uint64_t *seg_bytes);

/* Builds (first call of a shape: allocation + copies, not capturable) or finds the program and
 * launches one kernel (+ one scaling kernel for avg) on `stream`. Graph-capture safe once the
 * shape was built: call pcl_exec_prepare before capturing. */
ncclResult_t pcl_exec_launch(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                             cudaStream_t stream);

/* The kernel a call of this shape runs on ("interpreter", "LL kernel", "EW2 kernel", ...),
 * building the program of a new shape; NULL when it cannot be built. */
const char *pcl_exec_kernel(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan, const pcl_exec_args_t *a);

/* Builds the program for a shape without launching (before stream capture). */
ncclResult_t pcl_exec_prepare(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan,
                              const pcl_exec_args_t *a);

/* 1 when `dev_ranks` grids of `plan` fit on this context's device at once (see
 * pcl_exec_config_t.dev_ranks); else 0, and `why` (may be NULL) names the plan, the ranks and
 * the block counts. Deterministic on every rank of devices of one kind. */
int pcl_exec_coresident(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan, char *why, size_t why_len);

/* Phase timing of block 0 of this context's calls, summed since the last reset (kernel_abi.h,
 * pcl_kprof_t): copies the totals to *out and, with reset, zeroes them. The caller first
 * synchronises the stream(s) its calls ran on; nothing here waits for the device.
 * ncclInvalidUsage when the kernels were built without PCL_KPROF. */
ncclResult_t pcl_exec_prof_read(pcl_exec_ctx_t *ctx, pcl_kprof_t *out, int reset);

/* Drops the programs built for `plan`: call before destroying a plan the context ran (a later
 * plan at the same address must not find them). The caller synchronised its calls. */
void pcl_exec_forget(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan);

/* Kernel-side error recorded so far: ncclSuccess, or ncclSystemError (timeout, FIFO) /
 * ncclInvalidUsage (aborted). *kerr (may be NULL) gets the raw PCL_KERR_* word. Never blocks.
 * The first time it sees the kernels' hang report it logs it (WARN, once per context). */
ncclResult_t pcl_exec_async_error(pcl_exec_ctx_t *ctx, uint32_t *kerr);

/* The hang report in words (kernel_abi.h, pcl_khang_t): what the first thread of this context
 * to give up was waiting for. 1 and buf filled once the kernels wrote one; else 0 and "". */
int pcl_exec_hang_report(pcl_exec_ctx_t *ctx, char *buf, size_t len);

/* What the words are made from (exec_hang.c, pure CPU): the program's plan and layout, and where
 * this rank's memory lies, to tell which buffer an address is in. */
typedef struct {
  const pcl_plan_t *plan; /* the plan of the program that gave up, or NULL */
  int rank;               /* the plan rank it ran (communicator rank: with shift applied) */
  int shift;              /* its root relabelling (pcl_plan_root_shift), 0 without */
  const pcl_plan_layout_t *layout; /* the call's layout (names a packet's writers), or NULL */
  const char *kernel;              /* "EW2 kernel", ..., or NULL */
  uint64_t scratch, scratch_half, scratch_bytes; /* half 0: no double scratch */
  uint64_t sems;                                 /* the program's semaphores */
  int nsems;
  uint64_t barriers, barrier_bytes; /* the context's grid barriers */
  int nports;                       /* the program's port channels */
  const uint64_t *port_tail, *port_inbound;
  const int *port_peer;
} pcl_exec_hang_where_t;
int pcl_exec_hang_describe(const pcl_khang_t *h, const pcl_exec_hang_where_t *w, char *buf,
                           size_t len);

/* Sets the abort flag: every spinning kernel of this context gives up promptly. */
void pcl_exec_abort(pcl_exec_ctx_t *ctx);
/* A planned call could not be launched here (its peers launched theirs): this rank's next call
 * would pair with the peers' current one, so the context stops for good: the abort flag for
 * its kernels in flight, and PCL_KERR_LAUNCH in the error word (unless one is there already),
 * which pcl_exec_async_error reports and the dispatcher refuses planned calls by. */
void pcl_exec_fail(pcl_exec_ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif
