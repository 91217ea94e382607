/* SPDX-License-Identifier: MIT
 * exec_plans --soak N: N planned allreduce calls of mixed plans, sizes and placements, every
 * result checked on the GPU (a fill kernel before each call, a check kernel after it), without a
 * host synchronisation per call; host and GPU memory measured before and after. The inputs are
 * small integers in fp32, so the sum is exact in any order and needs no simulator. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime.h>
#include "exec_rank.h"

#include "gpu_test_check.h"

#define XK_MAX_SHAPES 64
#define XK_CHECK_EVERY 20000 /* calls between reads of the error counter */

typedef struct {
  const pcl_plan_t *plan;
  uint64_t bytes;
  int inplace;
} shape_t;

/* in[i] of rank r in call k: small integers, exact when summed over up to 8 ranks. */
static __device__ __forceinline__ float soak_value(uint32_t r, uint32_t i, uint32_t k) {
  return (float)((r * 7u + i * 3u + k) & 63u);
}

static __global__ void soak_fill(float *in, uint32_t n, uint32_t rank, uint32_t k) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    in[i] = soak_value(rank, i, k);
}

/* bad[0]: wrong elements so far; bad[1]: the first wrong call + 1 (0: none). */
static __global__ void soak_check(const float *out, uint32_t n, uint32_t nranks, uint32_t k,
                                  unsigned long long *bad) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float want = 0;
    for (uint32_t r = 0; r < nranks; r++)
      want += soak_value(r, i, k);
    if (out[i] != want) {
      atomicAdd(&bad[0], 1ull);
      atomicCAS(&bad[1], 0ull, (unsigned long long)k + 1ull);
    }
  }
}

/* Every (allreduce plan, size, placement) this context runs with fp32 sums and no registered
 * buffers, sizes spread over each plan's range up to 64 KiB. Deterministic on every rank. */
static int pick_shapes(xr_t *R, pcl_plan_t **plans, int np, shape_t *out) {
  static const uint64_t sizes[] = {16, 48, 256, 1024, 4096 + 16, 16384, 32768 + 256, 65536};
  int n = 0;
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pl = plans[p];
    if (pl->collective != PCL_PLAN_COLL_ALLREDUCE || !pcl_plan_accepts_op(pl, ncclSum))
      continue;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && n < XK_MAX_SHAPES; s++) {
      for (int inplace = 1; inplace >= 0 && n < XK_MAX_SHAPES; inplace--) {
        /* As the sweep: a plan's own placement, and out of place for in-place plans that
         * allow it. */
        if (inplace != pl->inplace && !(pl->inplace && pl->outofplace_ok && !inplace))
          continue;
        if (!pcl_plan_size_runnable(pl, sizes[s]))
          continue;
        pcl_exec_args_t a = xr_args_1k(R);
        a.in = inplace ? R->d_out : R->d_in;
        a.in_bytes = a.out_bytes = sizes[s];
        pcl_exec_shape_t sh;
        if (pcl_exec_shape(pl, R->rank, sizes[s], sizes[s], &sh) != ncclSuccess || sh.remote_io ||
            sh.port_io || !pcl_exec_supported(R->ctx[0], pl, &a))
          continue;
        out[n].plan = pl;
        out[n].bytes = sizes[s];
        out[n++].inplace = inplace;
      }
    }
  }
  return n;
}

int xk_run_soak(xr_t *R, pcl_plan_t **plans, int np, long ncalls) {
  int rank = R->rank;
  xp_rank_res_t *res = &R->g->res[rank];
  shape_t shapes[XK_MAX_SHAPES];
  int ns = pick_shapes(R, plans, np, shapes);
  unsigned long long *d_bad = NULL, h_bad[2] = {0, 0};
  xp_copy(res->fault[0].name, sizeof(res->fault[0].name), "soak: mixed planned calls checked");
  res->nfaults = 1;
  res->fault[0].ok = -1;
  if (ns == 0) { /* e.g. groups whose plans all need registered buffers: nothing to soak */
    xp_copy(res->fault[0].detail, sizeof(res->fault[0].detail),
            "no allreduce plan of this group runs fp32 sums without registered buffers");
    res->fault[0].ok = 0;
    return 0;
  }
  /* Load the soak's kernels now: lazy module loading at a first launch can wait behind a peer's
   * kernel spinning on this GPU for this rank's part, which the first call then never gets (a
   * 10 s timeout and garbage: the first GPU run of the soak). */
  struct cudaFuncAttributes fa;
  CUCK(cudaFuncGetAttributes(&fa, (const void *)soak_fill));
  CUCK(cudaFuncGetAttributes(&fa, (const void *)soak_check));
  for (int s = 0; s < ns; s++) {
    pcl_exec_args_t a = xr_args_1k(R);
    a.in = shapes[s].inplace ? R->d_out : R->d_in;
    a.in_bytes = a.out_bytes = shapes[s].bytes;
    CK(pcl_exec_prepare(R->ctx[0], shapes[s].plan, &a)); /* every program built up front */
  }
  CUCK(cudaMalloc((void **)&d_bad, sizeof(h_bad)));
  CUCK(cudaMemset(d_bad, 0, sizeof(h_bad)));
  CK(pcl_bootstrap_barrier(R->boot));
  xr_usage_t u0, u1;
  xr_usage_now(&u0);
  uint64_t rng = 0x9e3779b97f4a7c15ull; /* the same sequence on every rank */
  double t0 = xr_now_s();
  long k;
  for (k = 0; k < ncalls; k++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    const shape_t *sh = &shapes[rng % (uint64_t)ns];
    float *in = (float *)(sh->inplace ? R->d_out : R->d_in), *out = (float *)R->d_out;
    const uint32_t n = (uint32_t)(sh->bytes / 4);
    soak_fill<<<(n + 255) / 256, 256, 0, R->st[0]>>>(in, n, (uint32_t)rank, (uint32_t)k);
    pcl_exec_args_t a = xr_args_1k(R);
    a.in = in;
    a.in_bytes = a.out_bytes = sh->bytes;
    CK(pcl_exec_launch(R->ctx[0], sh->plan, &a, R->st[0]));
    soak_check<<<(n + 255) / 256, 256, 0, R->st[0]>>>(out, n, (uint32_t)R->g->nranks, (uint32_t)k,
                                                      d_bad);
    if ((k + 1) % XK_CHECK_EVERY == 0 || k + 1 == ncalls) {
      CUCK(cudaMemcpyAsync(h_bad, d_bad, sizeof(h_bad), cudaMemcpyDeviceToHost, R->st[0]));
      CUCK(cudaStreamSynchronize(R->st[0]));
      uint32_t kerr = 0;
      if (h_bad[0] != 0 || pcl_exec_async_error(R->ctx[0], &kerr) != ncclSuccess)
        break;
    }
  }
  double secs = xr_now_s() - t0;
  CUCK(cudaStreamSynchronize(R->st[0]));
  CK(pcl_bootstrap_barrier(R->boot));
  xr_usage_now(&u1);
  uint32_t kerr = 0;
  pcl_exec_async_error(R->ctx[0], &kerr);
  const long done = k < ncalls ? k + 1 : ncalls;
  /* GPU memory within 2 MiB and RSS within 8 MiB (allocator granularity, heap high water). */
  int ok = done == ncalls && h_bad[0] == 0 && kerr == 0 &&
           u1.gpu_free + (2u << 20) >= u0.gpu_free && u1.rss_kib - u0.rss_kib < 8192;
  char first[48] = "";
  if (h_bad[1] != 0)
    snprintf(first, sizeof(first), " (first in call %llu)", h_bad[1] - 1);
  snprintf(res->fault[0].detail, sizeof(res->fault[0].detail),
           "%ld of %ld calls over %d shapes in %.1f s (%.2f us/call), %llu wrong elements%s, "
           "kernel error %u, GPU free %zu -> %zu MiB, RSS %ld -> %ld KiB",
           done, ncalls, ns, secs, secs * 1e6 / (double)(done ? done : 1), h_bad[0], first, kerr,
           u0.gpu_free >> 20, u1.gpu_free >> 20, u0.rss_kib, u1.rss_kib);
  if (rank == 0) {
    printf("  soak: %s\n", res->fault[0].detail);
    fflush(stdout);
  }
  res->fault[0].secs = secs;
  res->fault[0].ok = ok ? 1 : -1;
  cudaFree(d_bad);
  return 0;
}
