/* SPDX-License-Identifier: MIT
 * The benches' clock and percentiles: the monotonic clock in microseconds and a sample's median
 * and upper percentile. */
#ifndef PCL_BENCH_TIME_H
#define PCL_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts t[0..n) (n > 0) and returns its median; *upper gets the q-quantile (0 <= q < 1). */
static inline double bench_sorted_stats(double *t, int n, double q, double *upper) {
  qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
  *upper = t[(int)((double)n * q)];
  return t[n / 2];
}

#endif
