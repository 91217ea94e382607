/* SPDX-License-Identifier: MIT
 * planccl-bench's results and their writers: the nccl-tests-style table per library and
 * collective, the CSV that bench/plot.py reads, the progress line, and the path planccl logged. */
#ifndef PCL_BENCH_REPORT_H
#define PCL_BENCH_REPORT_H

#include <stdio.h>
#include "bench_check.h"
#include "bench_opts.h"

enum { BENCH_EAGER, BENCH_GRAPH, BENCH_MODES };
enum { BENCH_OUT, BENCH_IN, BENCH_PLACES };
#define BENCH_PATH_LEN 64

/* One library's results; us < 0: not measured (graphs off, no in-place form, or it failed). */
typedef struct {
  double us[BENCH_COLL_COUNT][BENCH_MAX_SIZES][BENCH_PLACES][BENCH_MODES];
  long long wrong[BENCH_COLL_COUNT][BENCH_MAX_SIZES][BENCH_PLACES][BENCH_MODES];
  char path[BENCH_COLL_COUNT][BENCH_MAX_SIZES][BENCH_PLACES][BENCH_PATH_LEN]; /* "" unknown */
  int measured; /* 0: failed to load, init or run; the tables leave it out */
} bench_result_t;

/* Every time "not measured", nothing wrong, no path. */
void bench_result_clear(bench_result_t *r);

/* Keeps the better time of `run` in `best` and adds its wrong counts; paths of `run` win. */
void bench_result_merge(bench_result_t *best, const bench_result_t *run);

/* A run's result from its ranks' own: the slowest rank's time, every rank's wrong elements. */
void bench_result_from_ranks(bench_result_t *out, const bench_result_t *ranks, int n);

/* The table of collective index `ci` (into o->colls) for library `l`; the speedup columns
 * (baseline time / this time) appear when the baseline was measured and is another library. */
void bench_write_table(FILE *f, const bench_opts_t *o, const bench_result_t *res, int l, int ci);

/* Every measured (library, collective, size, placement, mode) as one CSV row, header first. */
void bench_write_csv(FILE *f, const bench_opts_t *o, const bench_result_t *res);
extern const char bench_csv_header[];

/* Sum of the wrong counts of every measured library. */
long long bench_total_wrong(const bench_opts_t *o, const bench_result_t *res);

/* The message size planccl's "pcl_path" lines give for a call (shim/dispatch/stats.c: count times
 * the element size, times the ranks for allgather and reduce-scatter). */
size_t bench_path_bytes(const bench_case_t *k);

/* The path planccl logged in `log` for (coll, bytes, inplace): "plan:NAME", "nccl", ... into
 * `out`; "" when the log has no such line (or cannot be read). */
void bench_path_of(const char *log, bench_coll_t coll, size_t bytes, int inplace, char *out,
                   size_t len);

/* "planccl-bench: [done/total] LABEL COLL SIZE done, M:SS left": the time left extrapolated
 * from the `elapsed_us` spent on the units done so far. */
void bench_progress(FILE *f, int done, int total, double elapsed_us, const char *label,
                    bench_coll_t coll, size_t bytes);

/* "1K", "64M", or the plain number of bytes. */
void bench_fmt_size(size_t b, char *buf, size_t n);

#endif
