/* SPDX-License-Identifier: MIT
 * Private to the executor: registered user buffers and windows (exec_userbuf.c) as the program
 * builder and launcher (exec.c) see them; one call's program (exec.c) under the segmenting of
 * exec_segment.c. */
#ifndef PCL_EXEC_INT_H
#define PCL_EXEC_INT_H

#include "exec.h"
#include "memchan.h"

/* A window: [base, base + bytes) exchanged once with every peer. */
struct pcl_exec_window {
  pcl_exec_ctx_t *ctx;
  pcl_memchan_buf_t *buf; /* memory channels only: port-channel plans are refused on views */
  uintptr_t base;
  size_t bytes;
  int views; /* live views over it: it outlives them */
};

/* Input [0] and output [1]. An exact registration owns its memchan buffers and rank r's buffer is
 * the one r registered; a view borrows its windows' buffers and rank r's buffer lies at
 * r's window base + off[k][r]. */
struct pcl_exec_userbuf {
  pcl_exec_ctx_t *ctx;
  pcl_memchan_buf_t *buf[2]; /* registered apart even when in == out (exec.h) */
  uint32_t port_id[2];       /* port-channel memory ids (PCL_KABI_NO_MEM) */
  pcl_exec_window_t *win[2]; /* a view's windows, NULL for an exact registration */
  uint64_t *off[2];          /* a view's [nranks] offsets into each rank's window */
};

/* The configuration the context was created with. */
const pcl_exec_config_t *pcl_exec_ctx_cfg(const pcl_exec_ctx_t *ctx);
/* Drops the programs bound to `ub` (before it is freed: a later one may reuse its address). */
void pcl_exec_drop_userbuf(pcl_exec_ctx_t *ctx, const pcl_exec_userbuf_t *ub);
/* The address of `peer`'s input (type PCL_PLAN_BUF_INPUT) or output buffer of `ub` as mapped
 * here; 0 when ub is NULL or the peer's is not mapped. */
uint64_t pcl_exec_userbuf_peer(const pcl_exec_userbuf_t *ub, int peer, int type);
/* Its port-channel memory id for input or output, PCL_KABI_NO_MEM when none. */
uint32_t pcl_exec_userbuf_port_id(const pcl_exec_userbuf_t *ub, int type);

/* exec.h's pcl_exec_supported, _prepare, _kernel and _launch for one segment (the whole call,
 * when it is not segmented): exec.c. */
int pcl_exec_one_supported(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan, const pcl_exec_args_t *a);
ncclResult_t pcl_exec_one_prepare(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan,
                                  const pcl_exec_args_t *a);
const char *pcl_exec_one_kernel(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan,
                                const pcl_exec_args_t *a);
/* One communicator's kernels must run one after another (flags, barriers, scratch halves), as
 * NCCL orders a communicator's calls whatever their streams: before a launch, pcl_exec_order
 * makes its stream wait for the last eager launch when that was on another stream; after it,
 * pcl_exec_ordered records where it went (only once calls came on several streams: one stream
 * costs nothing). Captured launches are left to their graph. */
ncclResult_t pcl_exec_order(pcl_exec_ctx_t *ctx, cudaStream_t stream);
ncclResult_t pcl_exec_ordered(pcl_exec_ctx_t *ctx, cudaStream_t stream);
ncclResult_t pcl_exec_one_launch(pcl_exec_ctx_t *ctx, const pcl_plan_t *plan,
                                 const pcl_exec_args_t *a, cudaStream_t stream);
/* The scratch a call of `plan` may use: all of it, or both halves of a double-scratch plan. */
uint64_t pcl_exec_scratch_avail(const pcl_exec_ctx_t *ctx, const pcl_plan_t *plan);

#endif
