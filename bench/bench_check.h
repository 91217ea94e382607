/* SPDX-License-Identifier: MIT
 * What one benchmarked call is (counts and buffer lengths per collective, nccl-tests' sizes and
 * bus bandwidth factors) and how its result is checked: an input pattern of small integers that
 * every data type holds exactly, and the expected output computed on the host. */
#ifndef PCL_BENCH_CHECK_H
#define PCL_BENCH_CHECK_H

#include <stddef.h>
#include "bench_opts.h"

typedef struct {
  bench_coll_t coll;
  bench_dtype_t dtype;
  bench_op_t op;
  int nranks, root;
  size_t count;     /* the count argument of the call (per peer for all-to-all) */
  size_t in_elems;  /* elements of each rank's input */
  size_t out_elems; /* elements of each rank's output */
  size_t bytes;     /* the size reported (nccl-tests: the largest buffer, in bytes) */
} bench_case_t;

/* The call that `size` bytes means for `coll`, rounded down as nccl-tests does. Returns 0, or -1
 * when that leaves no element. */
int bench_case(bench_coll_t coll, bench_dtype_t dtype, bench_op_t op, int nranks, int root,
               size_t size, bench_case_t *k);

/* busbw = algbw * factor, nccl-tests' factor for `coll` on `nranks` ranks. */
double bench_busbw_factor(bench_coll_t coll, int nranks);
/* GB/s (1e9 bytes) of `bytes` in `us` microseconds; 0 when us <= 0. */
double bench_algbw(size_t bytes, double us);

/* In-place calls share one buffer: the input starts `*in_off` elements into it and the output
 * `*out_off` elements (nccl-tests' layout: allgather's input is the rank's slot of the output,
 * reduce-scatter's output the rank's slot of the input). */
void bench_inplace_offsets(const bench_case_t *k, int rank, size_t *in_off, size_t *out_off);

/* Writes rank `rank`'s input, k->in_elems elements of k->dtype, to `buf`. */
void bench_fill_input(const bench_case_t *k, int rank, void *buf);

/* Compares rank `rank`'s output (k->out_elems elements at `out`) with the expected one and
 * returns the number of wrong elements (0 for a reduce's non-root rank, whose output is
 * undefined). Exact, except avg on floating types, whose 1/n scaling rounds. */
size_t bench_count_wrong(const bench_case_t *k, int rank, const void *out);

/* Element `i` of `buf` as a double, and `v` stored as element `i`; `v` must be exactly
 * representable in the data type (the patterns are). */
double bench_load(bench_dtype_t t, const void *buf, size_t i);
void bench_store(bench_dtype_t t, void *buf, size_t i, double v);

#endif
