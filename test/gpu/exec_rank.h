/* SPDX-License-Identifier: MIT
 * One rank of the exec_plans GPU test: its resources, the case it runs, and the helpers the case
 * sweep, graph and alternation tests share (exec_rank.cu, exec_sweep.cu). */
#ifndef PCL_EXEC_RANK_H
#define PCL_EXEC_RANK_H

#include <cuda_runtime_api.h>
#include "exec.h"
#include "exec_plans.h"
#include "memchan.h"
#include "portchan.h"

#define XR_SCRATCH_BYTES (xp_opts.scratch_bytes ? xp_opts.scratch_bytes : (64ull << 20))

typedef struct {
  xp_group_t *g;
  int rank, dev, any_port;
  pcl_bootstrap_t *boot;
  pcl_mem_alloc_t *scratch[2];
  pcl_memchan_t *mc[2];
  pcl_portchan_t *pc[2];
  pcl_exec_ctx_t *ctx[2]; /* two communicators: [1] for the interleaving test */
  cudaStream_t st[2];
  uint8_t *d_in, *d_out; /* XP_BUF_BYTES each */
  /* Windows over d_in and d_out on ctx[0], made at the first registration that uses them;
   * registrations alternate between exact buffers and views of these (nreg counts them). */
  pcl_exec_window_t *win[2];
  int nreg;
  uint8_t *h_out;
} xr_t;

/* One case: a plan, a message size, a placement, a dtype, an op and a packet format. */
typedef struct {
  const pcl_plan_t *plan;
  uint64_t msg, in_bytes, out_bytes;
  ncclDataType_t dt;
  ncclRedOp_t op;
  int inplace, ll8;
  int root;       /* broadcast, reduce: any root (the executor relabels the plan's rank 0) */
  uint32_t shift; /* bytes added to both device buffers: element-aligned, not word-aligned */
  const pcl_exec_userbuf_t *ub; /* registered buffers (zero-copy / port plans), else NULL */
  /* The executor runs it as nseg calls of seg bytes (the last the rest): pcl_exec_segments.
   * Each reduces in its own chunks' order, so the reference is simulated per segment. */
  uint64_t nseg, seg;
} xr_case_t;

/* What the sweep learnt about a plan, for the graph test. */
typedef struct {
  xr_case_t first_ok; /* the first case that passed, the first segmented one if any (its ub is
                       * stale: registered anew) */
  int have_ok, ok_segmented;
  unsigned kinds; /* 1u << XP_KIND_* */
  int zerocopy;
} plan_info_t;

/* exec_sweep.cu: the tests. Each returns nonzero only when the harness itself failed. */
int xs_run_plan(xr_t *R, const pcl_plan_t *pl, xp_plan_res_t *pr, plan_info_t *info,
                uint64_t *seed);
int xs_run_graphs(xr_t *R, pcl_plan_t **plans, int np, plan_info_t *info);
int xs_run_alternating(xr_t *R, pcl_plan_t **plans, int np);
/* One case on comm 0 (R->ctx[0]): the simulator's reference, launch, check; *kerr = 1 when any
 * rank's kernels recorded an error. Collective. */
int xs_one_case(xr_t *R, xr_case_t *c, uint64_t seed, xp_plan_res_t *pr, int *kerr);
/* exec_faults.cu: the kernel-fault scenarios (2 ranks): results in the group's fault rows. */
int xf_run_faults(xr_t *R, pcl_plan_t **plans, int np);
/* exec_soak.cu: ncalls mixed planned allreduce calls checked on the GPU (one fault row). */
int xk_run_soak(xr_t *R, pcl_plan_t **plans, int np, long ncalls);

int xr_setup(xr_t *R); /* collective: channels, contexts, streams */
void xr_teardown(xr_t *R);
/* Rank 0: runs the simulator on exactly this case and stores every rank's input and output. */
void xr_reference(const pcl_plan_t *pl, const xr_case_t *c, uint64_t seed, xp_ref_t *x);
void xr_bufs(const xr_t *R, const xr_case_t *c, uint8_t *din, uint8_t *dout, uint8_t **in,
             uint8_t **out);
uint64_t xr_region_bytes(const xr_case_t *c);
/* The simulator's rank whose input and result are this rank's: rank - root for rooted plans (the
 * simulator runs root 0), the rank itself for the rest. */
int xr_ref_rank(const xr_t *R, const xr_case_t *c);
pcl_exec_args_t xr_args(const xr_case_t *c, uint8_t *in, uint8_t *out);
/* What the process holds, for the leak checks (exec_faults.cu, exec_soak.cu): open descriptors,
 * threads, resident KiB, pcl_* allocations, the GPU's free bytes. */
typedef struct {
  long fds, threads, rss_kib, allocs;
  size_t gpu_free;
} xr_usage_t;
void xr_usage_now(xr_usage_t *u);
double xr_now_s(void); /* CLOCK_MONOTONIC seconds */

/* In place on d_out, 1 KB of fp32 sums: the latency, co-residency and fault checks' call. */
pcl_exec_args_t xr_args_1k(const xr_t *R);
/* An executor config on (mc, scratch) of XR_SCRATCH_BYTES, no port channels. */
pcl_exec_config_t xr_exec_config(const xr_t *R, pcl_memchan_t *mc, void *scratch,
                                 int64_t timeout_s);
/* One call on communicator comm's stream: xr_stage (output poisoned, x's input copied in),
 * then xr_launch_staged (the plan's kernel alone). */
int xr_stage(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din, uint8_t *dout);
int xr_launch_staged(xr_t *R, int comm, const xr_case_t *c, uint8_t *din, uint8_t *dout);
int xr_launch(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din,
              uint8_t *dout);
int xr_check(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din, uint8_t *dout,
             xp_plan_res_t *pr);
void xr_fail(xp_plan_res_t *pr, const xr_case_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int xr_any_kernel_error(xr_t *R, int *any);

#endif
