/* SPDX-License-Identifier: MIT
 * planccl-bench --hostpath: the host cost of one call (API entry to return) and the bare launch
 * floors under it (bench_launch.h), measured and printed as the "# host path" lines. */
#ifndef PCL_BENCH_HOSTPATH_H
#define PCL_BENCH_HOSTPATH_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include "bench_launch.h"
#include "bench_spawn.h"

/* Medians and p99s in us; a floor median < 0: not measured (no driver entry point). */
typedef struct {
  int nsizes; /* the timed calls cycle through this many sizes (--hostpath-sizes) */
  double first_median_us, first_p99_us, first_max_us; /* the first call of each size */
  double host_median_us, host_p99_us;
  double launch_median_us, launch_p99_us; /* cudaMemsetAsync of 16 bytes */
  double floor_median_us[PCL_BENCH_LAUNCH_COUNT], floor_p99_us[PCL_BENCH_LAUNCH_COUNT];
} bench_hostpath_t;

/* One call of the library on `s`: 0, or nonzero after printing why. */
typedef int (*bench_call_fn)(void *ctx);

/* Run by every rank's thread; `bar` meets the peers (a collective needs them); rank 0 writes
 * `out`. `call` cycles through `nsizes` sizes itself; their first calls are timed apart.
 * Returns 0 or -1 after printing the failure. */
int bench_hostpath_measure(int rank, cudaStream_t s, bench_barrier_t *bar, bench_call_fn call,
                           void *ctx, int nsizes, bench_hostpath_t *out);

/* Keeps the better call of `run` (first: take it) and, library-independent, the best floors. */
void bench_hostpath_merge(bench_hostpath_t *lib_best, bench_hostpath_t *floors,
                          const bench_hostpath_t *run, int first);

/* The "# host path" lines: one per library (labels[l] NULL: not measured), then the floors;
 * `step`: the bytes between the cycled sizes. */
void bench_hostpath_print(FILE *f, const char *coll, size_t bytes, size_t step, const char *path,
                          const char *const *labels, const bench_hostpath_t *res, int nlibs,
                          const bench_hostpath_t *floors);

#endif
