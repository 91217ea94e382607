/* SPDX-License-Identifier: MIT
 * An exec_plans rank from start to end: bootstrap, channels, the group's plans, the case sweep,
 * the graph and alternation tests, and the graph latency of a 1 KB LL allreduce and nop plans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "exec_rank.h"
#include "kernels.h"

#include "gpu_test_check.h"

/* Kernel time per call of `pl` under a CUDA graph of 100 calls, replayed 20 times. */
static int graph_latency(xr_t *R, const pcl_plan_t *pl, pcl_exec_args_t *b, double *us) {
  int rank = R->rank;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaEvent_t e0, e1;
  CK(pcl_exec_prepare(R->ctx[0], pl, b));
  CUCK(cudaStreamBeginCapture(R->st[0], cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 100; i++)
    CK(pcl_exec_launch(R->ctx[0], pl, b, R->st[0]));
  CUCK(cudaStreamEndCapture(R->st[0], &g));
  CUCK(cudaGraphInstantiate(&ge, g, 0));
  CUCK(cudaEventCreate(&e0));
  CUCK(cudaEventCreate(&e1));
  CUCK(cudaGraphLaunch(ge, R->st[0])); /* warm-up */
  CUCK(cudaStreamSynchronize(R->st[0]));
  CK(pcl_bootstrap_barrier(R->boot));
  CUCK(cudaEventRecord(e0, R->st[0]));
  for (int i = 0; i < 20; i++)
    CUCK(cudaGraphLaunch(ge, R->st[0]));
  CUCK(cudaEventRecord(e1, R->st[0]));
  CUCK(cudaEventSynchronize(e1));
  float ms = 0;
  CUCK(cudaEventElapsedTime(&ms, e0, e1));
  *us = ms * 1000.0 / 2000.0;
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  CK(pcl_bootstrap_barrier(R->boot));
  return 0;
}

/* A plan of nr ranks whose every block runs one nop: the interpreter's fixed cost. */
static int nop_plan(int nr, int nblocks, int nthreads, pcl_plan_t **out) {
  int rank = 0;
  char err[512];
  /* Per call (rank threads build theirs at the same time); up to 1024 blocks x 8 ranks. */
  const size_t tcap = (size_t)nblocks * 96 + 1, cap = (size_t)nr * (tcap + 200) + 256;
  char *json = (char *)malloc(cap), *tbs = (char *)calloc(1, tcap);
  if (json == NULL || tbs == NULL) {
    free(json);
    free(tbs);
    FAIL("out of memory");
  }
  size_t tl = 0;
  for (int b = 0; b < nblocks; b++)
    tl += snprintf(
        tbs + tl, tcap - tl,
        "%s{\"id\":%d,\"channels\":[],\"remote_buffer_refs\":[],\"ops\":[{\"name\":\"nop\"}]}",
        b ? "," : "", b);
  int n = snprintf(json, cap,
                   "{\"name\":\"nop_%dx%d\",\"collective\":\"allreduce\",\"protocol\":\"Simple\","
                   "\"inplace\":true,\"num_threads_per_block\":%d,\"gpus\":[",
                   nblocks, nthreads, nthreads);
  for (int r = 0; r < nr; r++)
    n += snprintf(json + n, cap - n,
                  "%s{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
                  "\"channels\":[],\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[%s]}",
                  r ? "," : "", r, tbs);
  snprintf(json + n, cap - n, "]}");
  ncclResult_t r = pcl_plan_load_buffer("nop.json", json, strlen(json), out, err, sizeof(err));
  free(json);
  free(tbs);
  if (r != ncclSuccess)
    FAIL("nop plan: %s", err);
  return 0;
}

static int run_latency(xr_t *R, pcl_plan_t **plans, int np) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  pcl_exec_args_t b = xr_args_1k(R);
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pl = plans[p];
    if (pl->collective != PCL_PLAN_COLL_ALLREDUCE || pl->protocol != PCL_PLAN_PROTO_LL ||
        !pl->inplace || !pcl_plan_size_runnable(pl, 1024) || !pcl_plan_accepts_op(pl, ncclSum) ||
        !pcl_exec_supported(R->ctx[0], pl, &b))
      continue;
    if (graph_latency(R, pl, &b, &res->lat_ll_1k))
      return 1;
    break;
  }
  static const int shapes[2][2] = {{1, 32}, {8, 512}};
  for (int k = 0; k < 2; k++) {
    pcl_plan_t *nop = NULL;
    if (nop_plan(R->g->nranks, shapes[k][0], shapes[k][1], &nop))
      return 1;
    double us = -1;
    if (pcl_exec_supported(R->ctx[0], nop, &b))
      if (graph_latency(R, nop, &b, &us))
        return 1;
    *(k ? &res->lat_nop8 : &res->lat_nop1) = us;
    pcl_exec_forget(R->ctx[0], nop);
    pcl_plan_destroy(nop);
  }
  return 0;
}

/* The executor's co-residency check: a plan of 1024-thread nop blocks one block too large for
 * every rank sharing the GPU to be resident must be refused, with the plan named, and the
 * largest one that fits accepted. Host only: nothing is launched. */
static int check_coresidency(xr_t *R) {
  int rank = R->rank, prev = -1;
  xp_rank_res_t *res = &R->g->res[rank];
  cudaGetDevice(&prev);
  cudaSetDevice(R->dev);
  int fit = pcl_kernels_resident_blocks(1024);
  cudaSetDevice(prev);
  int k = R->g->dev_ranks, most = fit / k;
  res->cores = -1;
  if (fit <= 0)
    FAIL("no occupancy for 1024-thread blocks (%d)", fit);
  if (most + 1 > PCL_PLAN_MAX_BLOCKS) { /* a GPU per rank: no valid plan is too large */
    res->cores = 0;
    return 0;
  }
  pcl_exec_args_t b = xr_args_1k(R);
  int ok = 1;
  for (int extra = 0; extra < 2; extra++) {
    pcl_plan_t *p = NULL;
    if (nop_plan(R->g->nranks, most + extra, 1024, &p))
      return 1;
    char why[320] = "";
    int fits = pcl_exec_coresident(R->ctx[0], p, why, sizeof(why));
    int sup = pcl_exec_supported(R->ctx[0], p, &b);
    ok &= extra ? !fits && !sup && strstr(why, p->name) != NULL : fits && sup;
    if (rank == 0 && extra)
      printf("  co-residency: %s\n", why);
    pcl_exec_forget(R->ctx[0], p);
    pcl_plan_destroy(p);
  }
  res->cores = ok ? 1 : -1;
  return 0;
}

int xp_rank_main(xp_group_t *g, int rank) {
  xr_t R;
  memset(&R, 0, sizeof(R));
  R.g = g;
  R.rank = rank;
  xp_rank_res_t *res = &g->res[rank];
  pcl_plan_t *plans[XP_MAX_PLANS];
  plan_info_t info[XP_MAX_PLANS];
  int np = 0, rc = 0;
  memset(info, 0, sizeof(info));
  res->ran = 1;
  for (int i = 0; i < g->npaths; i++) {
    char err[512];
    pcl_plan_t *p = NULL;
    if (pcl_plan_load(g->paths[i], &p, err, sizeof(err)) != ncclSuccess)
      FAIL("%s", err); /* main loaded it before: it must load here too */
    R.any_port |= p->gpus[rank].n_channels[PCL_PLAN_CHAN_PORT] > 0;
    plans[np++] = p;
  }
  /* Every rank must agree on port channels: a plan has them on some rank iff on its peers. */
  int ports[XP_MAXR];
  CK(pcl_bootstrap_create(&g->handle, rank, g->nranks, NULL, &R.boot));
  ports[rank] = R.any_port;
  CK(pcl_bootstrap_allgather(R.boot, ports, sizeof(int)));
  for (int r = 0; r < g->nranks; r++)
    R.any_port |= ports[r];
  if (xr_setup(&R))
    return 1;
  CUCK(cudaMalloc((void **)&R.d_in, XP_BUF_BYTES));
  CUCK(cudaMalloc((void **)&R.d_out, XP_BUF_BYTES));
  R.h_out = (uint8_t *)malloc(XP_BUF_BYTES);
  uint64_t seed = 3; /* the simulator's seeds >= 3 schedule randomly (reproducibly) */
  /* --soak: the soak alone (exec_soak.cu); otherwise every test below. */
  const int full = xp_opts.soak <= 0;
  if (!full)
    rc = xk_run_soak(&R, plans, np, xp_opts.soak);
  for (int p = 0; full && p < np && rc == 0; p++) {
    rc = xs_run_plan(&R, plans[p], &res->plan[p], &info[p], &seed);
    res->nplans = p + 1;
    if (rank == 0) {
      const xp_plan_res_t *pr = &res->plan[p];
      printf("  [%d ranks, %d per host] %-30s cases %5d fail %3d skip %4d%s%s\n", g->nranks, g->rpn,
             pr->name, pr->cases, pr->fail, pr->skip, pr->note[0] ? "  " : "", pr->note);
      fflush(stdout);
    }
  }
  if (rc == 0 && full && !xp_opts.no_graph)
    rc = xs_run_graphs(&R, plans, np, info);
  if (rc == 0 && full)
    rc = xs_run_alternating(&R, plans, np);
  if (rc == 0 && full && g->rpn == g->nranks && !xp_opts.no_latency)
    rc = run_latency(&R, plans, np);
  if (rc == 0 && full && g->rpn == g->nranks)
    rc = check_coresidency(&R);
  /* Last: they leave the scratch zeroed and comm 0's context behind the flags of theirs. */
  if (rc == 0 && full && g->nranks == 2 && g->rpn == 2 && !xp_opts.no_faults)
    rc = xf_run_faults(&R, plans, np);
  cudaDeviceSynchronize();
  if (R.boot != NULL)
    xr_teardown(&R);
  for (int k = 0; k < 2; k++)
    if (R.st[k] != NULL)
      cudaStreamDestroy(R.st[k]);
  for (int i = 0; i < np; i++)
    pcl_plan_destroy(plans[i]);
  cudaFree(R.d_in);
  cudaFree(R.d_out);
  free(R.h_out);
  pcl_bootstrap_destroy(R.boot);
  res->rc = rc;
  return rc;
}
