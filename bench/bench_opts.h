/* SPDX-License-Identifier: MIT
 * planccl-bench's command line: the collectives, data type, op, size sweep, process model and
 * libraries of one run, parsed without touching CUDA (so the unit tests can drive it). */
#ifndef PCL_BENCH_OPTS_H
#define PCL_BENCH_OPTS_H

#include <stddef.h>
#include <stdio.h>

#define BENCH_MAX_LIBS 8
#define BENCH_MAX_GPUS 8
#define BENCH_MAX_SIZES 64

typedef enum {
  BENCH_ALLREDUCE,
  BENCH_ALLGATHER,
  BENCH_REDUCESCATTER,
  BENCH_BROADCAST,
  BENCH_REDUCE,
  BENCH_ALLTOALL,
  BENCH_SENDRECV,
  BENCH_COLL_COUNT
} bench_coll_t;

/* Same order and values as ncclDataType_t (bench_run.c asserts it), so a cast converts. */
typedef enum {
  BENCH_INT8,
  BENCH_UINT8,
  BENCH_INT32,
  BENCH_UINT32,
  BENCH_INT64,
  BENCH_UINT64,
  BENCH_HALF,
  BENCH_FLOAT,
  BENCH_DOUBLE,
  BENCH_BFLOAT16,
  BENCH_FP8E4M3,
  BENCH_FP8E5M2,
  BENCH_DTYPE_COUNT
} bench_dtype_t;

/* Same order and values as ncclRedOp_t's built-in ops. */
typedef enum { BENCH_SUM, BENCH_PROD, BENCH_MAX, BENCH_MIN, BENCH_AVG, BENCH_OP_COUNT } bench_op_t;

typedef enum { BENCH_MODEL_THREAD, BENCH_MODEL_SINGLE, BENCH_MODEL_PROC } bench_model_t;

/* Bit set of the placements to run; index 0 = out-of-place, 1 = in-place. */
enum { BENCH_PLACE_OUT = 1, BENCH_PLACE_IN = 2 };

typedef struct {
  const char *label, *path;
  int symm; /* buffers by ncclMemAlloc, registered as NCCL_WIN_COLL_SYMMETRIC windows */
} bench_lib_spec_t;

typedef struct {
  int ncolls;
  bench_coll_t colls[BENCH_COLL_COUNT];
  bench_dtype_t dtype;
  bench_op_t op;
  int root, ngpus, iters, warmup, graph_iters, graph_launches, repeat, places, hostpath;
  int share_gpu;      /* rank r on device r mod the visible devices (libraries that allow it) */
  int hostpath_sizes; /* --hostpath-sizes: the host path cycles this many sizes (1) */
  bench_model_t model;
  int timeout_s; /* proc model: a run whose processes are not all done by then is killed */
  size_t sizes[BENCH_MAX_SIZES];
  int nsizes;
  int nlibs;
  bench_lib_spec_t libs[BENCH_MAX_LIBS];
  int baseline; /* index into libs of the library the others are compared with */
  const char *csv;
} bench_opts_t;

/* Parses argv (argv[0] skipped) into `o`; the strings of `o` point into argv, which --lib
 * modifies. Returns 0, 1 when help was asked for, or -1 with a one-line reason in `err`. */
int bench_parse_args(int argc, char **argv, bench_opts_t *o, char *err, size_t errlen);

void bench_usage(FILE *f);

/* "4K", "1M", "2G", "100": bytes; -1 when not a whole number of bytes with an optional suffix. */
long long bench_parse_bytes(const char *s);

/* The sweep min, min*f, ... up to max (within rounding), as nccl-tests' -b -e -f. Returns the
 * number of sizes, or -1 when there would be more than `cap`. */
int bench_sweep(size_t minb, size_t maxb, double factor, size_t *out, int cap);

const char *bench_coll_name(bench_coll_t c);
const char *bench_dtype_name(bench_dtype_t t);
const char *bench_op_name(bench_op_t op);
const char *bench_model_name(bench_model_t m);
size_t bench_dtype_size(bench_dtype_t t);

/* The bytes between the sizes --hostpath-sizes cycles: 8 per rank (or an element, if larger),
 * the finest step at which every rank's share stays aligned for planccl's LL16 packets. */
size_t bench_hostpath_step(const bench_opts_t *o);

/* 1 for the collectives that take a reduction op, and for those that take a root. */
int bench_coll_has_op(bench_coll_t c);
int bench_coll_has_root(bench_coll_t c);
/* 0 for the collectives that have no in-place form (all-to-all, send/recv). */
int bench_coll_has_inplace(bench_coll_t c);

#endif
