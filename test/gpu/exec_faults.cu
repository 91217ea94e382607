/* SPDX-License-Identifier: MIT
 * exec_plans' kernel faults, two ranks sharing a GPU: a rank that never launches its part, a rank
 * that stops between calls, an abort while kernels spin. The waiting rank must stop within the
 * timeout (or promptly at abort), report the error and a hang report naming plan, block, op,
 * flag and peer, and the GPU must run a fresh context correctly afterwards. Then 1,000
 * create/destroy cycles of channels and contexts must leave descriptors, threads, host and GPU
 * memory where they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "exec_rank.h"

#include "gpu_test_check.h"

/* A context of its own on comm 0's channels and scratch, zeroed first (a failed call leaves
 * packets of flag 1 behind, which a fresh context's first call would take for its own).
 * Collective: no kernel of any rank runs while it is made (pcl_exec_ctx_create synchronises the
 * device). */
static int fresh_ctx(xr_t *R, int64_t timeout_s, int interp, pcl_exec_ctx_t **out) {
  int rank = R->rank;
  CK(pcl_bootstrap_barrier(R->boot));
  CUCK(cudaMemsetAsync(R->scratch[0]->ptr, 0, XR_SCRATCH_BYTES, R->st[0]));
  CUCK(cudaStreamSynchronize(R->st[0]));
  CK(pcl_bootstrap_barrier(R->boot));
  pcl_exec_config_t ecfg = xr_exec_config(R, R->mc[0], R->scratch[0]->ptr, timeout_s);
  ecfg.interp_only = interp;
  CK(pcl_exec_ctx_create(&ecfg, out));
  CK(pcl_bootstrap_barrier(R->boot));
  return 0;
}

/* The first in-place LL allreduce plan that runs 1 KB of fp32 sums without port channels. */
static const pcl_plan_t *pick_plan(xr_t *R, pcl_plan_t **plans, int np) {
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pl = plans[p];
    if (pl->collective == PCL_PLAN_COLL_ALLREDUCE && pl->protocol == PCL_PLAN_PROTO_LL &&
        pl->inplace && pcl_plan_size_runnable(pl, 1024) && pcl_plan_accepts_op(pl, ncclSum) &&
        pl->gpus[R->rank].n_channels[PCL_PLAN_CHAN_PORT] == 0 &&
        pl->gpus[R->rank].n_channels[PCL_PLAN_CHAN_MEMORY] > 0)
      return pl;
  }
  return NULL;
}

typedef struct {
  const char *name;
  int interp;     /* the interpreter instead of the plan's fast kernel */
  int calls_both; /* calls both ranks make before rank 1 stops */
  int abort;      /* no timeout: rank 0 aborts after 300 ms */
} scenario_t;

static const scenario_t scenarios[] = {
    {"a rank never launches its part", 0, 0, 0},
    {"a rank never launches (interpreter)", 1, 0, 0},
    {"a rank stops between calls", 0, 1, 0},
    {"abort while a kernel spins", 0, 0, 1},
};

/* Rank 0 waits on rank 1, which launches only the first `calls_both` calls. */
static int run_scenario(xr_t *R, const pcl_plan_t *pl, const scenario_t *s, int k) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  pcl_exec_ctx_t *ctx = NULL;
  pcl_exec_args_t a = xr_args_1k(R);
  char why[1024] = "";
  int ok = 1;
  const int64_t timeout_s = s->abort ? 0 : 1;
  xp_copy(res->fault[k].name, sizeof(res->fault[k].name), s->name);
  if (fresh_ctx(R, timeout_s, s->interp, &ctx))
    return 1;
  CK(pcl_exec_prepare(ctx, pl, &a));
  const char *kernel = pcl_exec_kernel(ctx, pl, &a);
  for (int i = 0; i < s->calls_both; i++) {
    CK(pcl_exec_launch(ctx, pl, &a, R->st[0]));
    CUCK(cudaStreamSynchronize(R->st[0]));
  }
  CK(pcl_bootstrap_barrier(R->boot));
  ok &= pcl_exec_async_error(ctx, NULL) == ncclSuccess;
  double waited = 0;
  if (rank == 0) {
    CK(pcl_exec_launch(ctx, pl, &a, R->st[0]));
    double t0 = xr_now_s();
    if (s->abort) {
      usleep(300 * 1000);
      /* Still spinning (no timeout): only the abort ends it. */
      ok &= cudaStreamQuery(R->st[0]) == cudaErrorNotReady;
      t0 = xr_now_s();
      pcl_exec_abort(ctx);
    }
    CUCK(cudaStreamSynchronize(R->st[0]));
    waited = xr_now_s() - t0;
    uint32_t kerr = 0;
    ncclResult_t e = pcl_exec_async_error(ctx, &kerr);
    ok &= s->abort ? e == ncclInvalidUsage && kerr == PCL_KERR_ABORT
                   : e == ncclSystemError && kerr == PCL_KERR_TIMEOUT;
    /* Within the timeout (1 s) plus the watchdog's granularity and the launch; 1 s after abort. */
    ok &= s->abort ? waited < 1.0 : waited > 0.9 && waited < 3.0;
    int have = pcl_exec_hang_report(ctx, why, sizeof(why));
    char flag[48];
    snprintf(flag, sizeof(flag), "flag %d", s->calls_both + 1);
    ok &= have && strstr(why, pl->name) != NULL && strstr(why, "block ") != NULL &&
          strstr(why, flag) != NULL && strstr(why, "written by rank 1") != NULL &&
          strstr(why, s->abort ? "was aborted" : "timed out") != NULL;
    if (kernel != NULL)
      ok &= strstr(why, kernel) != NULL;
    printf("  fault \"%s\" (%s): stopped after %.3f s; %s\n", s->name, kernel ? kernel : "?",
           waited, have ? why : "NO HANG REPORT");
    fflush(stdout);
    res->fault[k].secs = waited;
    xp_copy(res->fault[k].detail, sizeof(res->fault[k].detail), why);
  }
  CK(pcl_bootstrap_barrier(R->boot));
  if (rank != 0)
    ok &= pcl_exec_async_error(ctx, NULL) == ncclSuccess; /* it never waited */
  pcl_exec_ctx_destroy(ctx);
  res->fault[k].ok = ok ? 1 : -1;
  return 0;
}

/* After the faults: a fresh context runs a checked 1 KB allreduce on the same GPU. */
static int usable_after(xr_t *R, const pcl_plan_t *pl, uint64_t seed, int k) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  pcl_exec_ctx_t *ctx = NULL, *saved = R->ctx[0];
  xp_plan_res_t pr;
  memset(&pr, 0, sizeof(pr));
  xp_copy(res->fault[k].name, sizeof(res->fault[k].name), "a fresh context works after them");
  if (fresh_ctx(R, 10, 0, &ctx))
    return 1;
  xr_case_t c;
  memset(&c, 0, sizeof(c));
  c.plan = pl;
  c.msg = 1024;
  c.dt = ncclFloat32;
  c.op = ncclSum;
  c.inplace = 1;
  if (pcl_plan_buffer_bytes(pl, c.msg, &c.in_bytes, &c.out_bytes) != 0)
    FAIL("plan %s: no 1 KB layout", pl->name);
  R->ctx[0] = ctx;
  int kerr = 0, rc = xs_one_case(R, &c, seed, &pr, &kerr);
  R->ctx[0] = saved;
  CK(pcl_bootstrap_barrier(R->boot));
  pcl_exec_ctx_destroy(ctx);
  res->fault[k].ok = rc == 0 && kerr == 0 && pr.pass == 1 && pr.fail == 0 ? 1 : -1;
  if (pr.first_fail[0])
    xp_copy(res->fault[k].detail, sizeof(res->fault[k].detail), pr.first_fail);
  return rc;
}

/* 1,000 cycles of memory channels + context + a built program, created and destroyed by both
 * ranks together. Measured by rank 0 at barriers (both ranks' resources are then made or gone)
 * after 20 warm-up cycles (the runtime's and the driver's one-time pools) and at the end. */

/* Flat over the cycles: planccl's allocations exactly; descriptors and threads may differ by a
 * one-time change (the runtime or the driver opening or closing one of their own once in the
 * window), but not grow in the second half of the cycles, where a leak of one per cycle adds
 * n/2; the GPU within 2 MiB (the driver's granularity), resident memory within 8 MiB (the heap's
 * high water mark). */
static int xp_usage_flat(const xr_usage_t *u0, const xr_usage_t *um, const xr_usage_t *u1) {
  return u1->allocs == u0->allocs && u1->fds <= um->fds && labs(u1->fds - u0->fds) <= 2 &&
         u1->threads <= um->threads && labs(u1->threads - u0->threads) <= 2 &&
         u1->gpu_free + (2u << 20) >= u0->gpu_free && u1->rss_kib - u0->rss_kib < 8192;
}

/* The check itself is checked: a descriptor or a thread leaked per cycle fails it, a one-time
 * change does not. */
static int xp_usage_flat_selftest(void) {
  xr_usage_t a = {50, 6, 1000, 600, 1u << 30}, m = a, b = a;
  m.fds = 51; /* opened once, early */
  b.fds = 51;
  if (!xp_usage_flat(&a, &m, &b))
    return 0;
  m.fds = 100; /* one per cycle */
  b.fds = 150;
  if (xp_usage_flat(&a, &m, &b))
    return 0;
  m = a;
  b = a;
  m.threads = 56;
  b.threads = 106;
  return !xp_usage_flat(&a, &m, &b);
}

static int cycles(xr_t *R, const pcl_plan_t *pl, int k, int n) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  xr_usage_t u0, um, u1;
  pcl_exec_args_t a = xr_args_1k(R);
  char name[64];
  snprintf(name, sizeof(name), "%d channel + context cycles leak nothing", n);
  xp_copy(res->fault[k].name, sizeof(res->fault[k].name), name);
  double t0 = 0;
  for (int i = 0; i < n + 20; i++) {
    if (i == 20 || i == 20 + n / 2) {
      CK(pcl_bootstrap_barrier(R->boot));
      xr_usage_now(i == 20 ? &u0 : &um);
      if (i == 20)
        t0 = xr_now_s();
    }
    pcl_memchan_t *mc = NULL;
    pcl_exec_ctx_t *ctx = NULL;
    pcl_memchan_config_t mcfg;
    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.cuda_dev = R->dev;
    mcfg.nchannels = 1;
    mcfg.scratch = R->scratch[1]->ptr;
    mcfg.scratch_bytes = XR_SCRATCH_BYTES;
    CK(pcl_memchan_create(R->boot, &mcfg, &mc));
    pcl_exec_config_t ecfg = xr_exec_config(R, mc, R->scratch[1]->ptr, 0);
    CK(pcl_exec_ctx_create(&ecfg, &ctx));
    CK(pcl_exec_prepare(ctx, pl, &a));
    pcl_exec_ctx_destroy(ctx);
    pcl_memchan_destroy(mc);
  }
  CK(pcl_bootstrap_barrier(R->boot));
  xr_usage_now(&u1);
  double secs = xr_now_s() - t0;
  CK(pcl_bootstrap_barrier(R->boot)); /* rank 1 measures nothing: keep both ranks here */
  int ok = xp_usage_flat(&u0, &um, &u1) && xp_usage_flat_selftest();
  if (rank == 0) {
    snprintf(res->fault[k].detail, sizeof(res->fault[k].detail),
             "%d cycles in %.2f s (start -> half -> end): fds %ld %ld %ld, threads %ld %ld %ld, "
             "pcl allocations %ld %ld %ld, RSS %ld %ld %ld KiB, GPU free %zu %zu %zu MiB",
             n, secs, u0.fds, um.fds, u1.fds, u0.threads, um.threads, u1.threads, u0.allocs,
             um.allocs, u1.allocs, u0.rss_kib, um.rss_kib, u1.rss_kib, u0.gpu_free >> 20,
             um.gpu_free >> 20, u1.gpu_free >> 20);
    printf("  %s\n", res->fault[k].detail);
    fflush(stdout);
    res->fault[k].secs = secs;
  }
  res->fault[k].ok = ok || rank != 0 ? 1 : -1;
  return 0;
}

int xf_run_faults(xr_t *R, pcl_plan_t **plans, int np) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  const pcl_plan_t *pl = pick_plan(R, plans, np);
  res->nfaults = 0;
  if (pl == NULL)
    return 0; /* the group has no plan to fault (a --filter left none) */
  const int ns = (int)(sizeof(scenarios) / sizeof(scenarios[0]));
  for (int k = 0; k < ns; k++) {
    if (run_scenario(R, pl, &scenarios[k], k))
      return 1;
    res->nfaults = k + 1;
  }
  if (usable_after(R, pl, 7, ns))
    return 1;
  res->nfaults = ns + 1;
  if (cycles(R, pl, ns + 1, xp_opts.quick ? 100 : 1000))
    return 1;
  res->nfaults = ns + 2;
  return 0;
}
