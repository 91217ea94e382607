/* SPDX-License-Identifier: MIT
 * planccl-bench --hostpath (bench_hostpath.h): host time of one call against the launch floors;
 * the output lines keep the format scripts/gpu_check.sh and run.sh grep ("# host path"). */
#include "bench_hostpath.h"
#include "bench_time.h"
#include <stdlib.h>
#include <string.h>

enum { HOST_N = 4096 };

typedef enum { TIME_CALL, TIME_MEMSET, TIME_FLOOR } what_t;

/* n runs, API entry to return, the stream drained every 256 (and the peers met there when
 * timing a collective); the median and p99 go to *med and *p99, the slowest to *max. */
static int host_times(int rank, cudaStream_t s, bench_barrier_t *bar, what_t what, int variant,
                      bench_call_fn call, void *ctx, const pcl_bench_launcher_t *lch, void *scratch,
                      int n, double *med, double *p99, double *max) {
  double *t = malloc((size_t)n * sizeof(double));
  int rc = -1;
  if (t == NULL)
    return -1;
  for (int i = 0; i < n; i++) {
    if (i % 256 == 0) {
      if (cudaStreamSynchronize(s) != cudaSuccess)
        goto out;
      if (what == TIME_CALL && bench_barrier_wait(bar) != 0)
        goto out;
    }
    double a = bench_now_us();
    int e = what == TIME_CALL     ? call(ctx)
            : what == TIME_MEMSET ? (int)cudaMemsetAsync(scratch, 0, 16, s)
                                  : pcl_bench_launch(lch, variant, s);
    t[i] = bench_now_us() - a;
    if (e != 0) {
      fprintf(stderr, "rank %d: host path timing failed: error %d\n", rank, e);
      goto out;
    }
  }
  if (cudaStreamSynchronize(s) != cudaSuccess)
    goto out;
  qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
  *med = t[n / 2];
  *p99 = t[((size_t)n * 99) / 100];
  if (max != NULL)
    *max = t[n - 1];
  rc = 0;
out:
  free(t);
  return rc;
}

int bench_hostpath_measure(int rank, cudaStream_t s, bench_barrier_t *bar, bench_call_fn call,
                           void *ctx, int nsizes, bench_hostpath_t *out) {
  bench_hostpath_t h;
  pcl_bench_launcher_t lch;
  void *scratch = NULL;
  int rc = -1;
  memset(&h, 0, sizeof(h));
  if (cudaMalloc(&scratch, 16) != cudaSuccess)
    goto out;
  /* The first call of each size on its own (a library may build per size), one more pass
   * untimed (a library may adapt to the cycle), then the timed cycle. */
  h.nsizes = nsizes;
  double settle[3];
  if (host_times(rank, s, bar, TIME_CALL, 0, call, ctx, NULL, NULL, nsizes, &h.first_median_us,
                 &h.first_p99_us, &h.first_max_us) != 0 ||
      (nsizes > 1 && host_times(rank, s, bar, TIME_CALL, 0, call, ctx, NULL, NULL, nsizes,
                                &settle[0], &settle[1], &settle[2]) != 0) ||
      host_times(rank, s, bar, TIME_CALL, 0, call, ctx, NULL, NULL, HOST_N, &h.host_median_us,
                 &h.host_p99_us, NULL) != 0 ||
      host_times(rank, s, bar, TIME_MEMSET, 0, NULL, NULL, NULL, scratch, HOST_N,
                 &h.launch_median_us, &h.launch_p99_us, NULL) != 0)
    goto out;
  (void)pcl_bench_launcher_init(&lch);
  for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++) {
    h.floor_median_us[v] = h.floor_p99_us[v] = -1;
    if (pcl_bench_launch_available(&lch, v) &&
        host_times(rank, s, bar, TIME_FLOOR, v, NULL, NULL, &lch, NULL, HOST_N,
                   &h.floor_median_us[v], &h.floor_p99_us[v], NULL) != 0)
      goto out;
  }
  if (rank == 0)
    *out = h;
  rc = 0;
out:
  cudaFree(scratch);
  return rc;
}

static void keep_best(double *med, double *p99, double m, double p) {
  if (m > 0 && (*med <= 0 || m < *med)) {
    *med = m;
    *p99 = p;
  }
}

void bench_hostpath_merge(bench_hostpath_t *lib_best, bench_hostpath_t *floors,
                          const bench_hostpath_t *run, int first) {
  if (first || run->host_median_us < lib_best->host_median_us)
    *lib_best = *run;
  keep_best(&floors->launch_median_us, &floors->launch_p99_us, run->launch_median_us,
            run->launch_p99_us);
  for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++)
    keep_best(&floors->floor_median_us[v], &floors->floor_p99_us[v], run->floor_median_us[v],
              run->floor_p99_us[v]);
}

void bench_hostpath_print(FILE *f, const char *coll, size_t bytes, size_t step, const char *path,
                          const char *const *labels, const bench_hostpath_t *res, int nlibs,
                          const bench_hostpath_t *fl) {
  for (int l = 0; l < nlibs; l++)
    if (labels[l] && res[l].nsizes > 1)
      fprintf(f,
              "# host path sizes: %s cycles %d sizes, %zu to %zu bytes by %zu; the first call of "
              "each: median %.3f us, p99 %.3f us, max %.3f us\n",
              labels[l], res[l].nsizes, bytes, bytes + (size_t)(res[l].nsizes - 1) * step, step,
              res[l].first_median_us, res[l].first_p99_us, res[l].first_max_us);
  for (int l = 0; l < nlibs; l++)
    if (labels[l])
      fprintf(f,
              "# host path of one %s call of %zu bytes (%s; planccl path %s): median %.3f us, "
              "p99 %.3f us; bare launches: cudaMemsetAsync %.3f us, empty kernel %.3f us\n",
              coll, bytes, labels[l], path[0] ? path : "?", res[l].host_median_us,
              res[l].host_p99_us, res[l].launch_median_us,
              res[l].floor_median_us[PCL_BENCH_EMPTY_RT]);
  fprintf(f,
          "# host path breakdown: median and p99 of %d calls each, 1 block of 32 threads, "
          "interpreter-shaped = %u B of kernel parameters and %u B of dynamic shared memory\n",
          HOST_N, pcl_bench_abi_param_bytes(), pcl_bench_abi_smem_bytes());
  fprintf(f, "# host path floor: %-52s median %7.3f us, p99 %7.3f us\n",
          "cudaMemsetAsync of 16 bytes", fl->launch_median_us, fl->launch_p99_us);
  for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++) {
    if (fl->floor_median_us[v] <= 0)
      fprintf(f, "# host path floor: %-52s unavailable (no driver entry point)\n",
              pcl_bench_launch_name(v));
    else
      fprintf(f, "# host path floor: %-52s median %7.3f us, p99 %7.3f us\n",
              pcl_bench_launch_name(v), fl->floor_median_us[v], fl->floor_p99_us[v]);
  }
  double own = fl->floor_median_us[PCL_BENCH_ABI_CU_KERNEL];
  if (own <= 0)
    own = fl->floor_median_us[PCL_BENCH_ABI_RT];
  for (int l = 0; l < nlibs; l++)
    if (labels[l])
      fprintf(f,
              "# host path call: %-52s median %7.3f us, p99 %7.3f us; %+.3f us above the "
              "interpreter-shaped launch\n",
              labels[l], res[l].host_median_us, res[l].host_p99_us, res[l].host_median_us - own);
}
