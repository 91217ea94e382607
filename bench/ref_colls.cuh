/* SPDX-License-Identifier: MIT
 * planccl-refbench's collectives (--coll), one table row each: the plans it times, its
 * hand-written reference (ref_<name>.cuh), its buffers, and what each rank's output must hold. */
#ifndef PCL_REF_COLLS_CUH
#define PCL_REF_COLLS_CUH

#include <string.h>
#include "plan.h"
#include "ref_allgather.cuh"
#include "ref_allreduce.cuh"
#include "ref_allreduce2.cuh"
#include "ref_allreduce_simple.cuh"
#include "ref_broadcast.cuh"
#include "ref_reduce.cuh"
#include "ref_reducescatter.cuh"

/* How a message of `bytes` makes each rank's buffers (plan.h's pcl_plan_buffer_bytes) and where
 * in place puts them (NCCL's placement, as test/gpu/exec_rank.cu's xr_bufs). */
typedef enum {
  PCL_REF_BUF_WHOLE,   /* in = out = bytes; in place: in == out */
  PCL_REF_BUF_GATHER,  /* in = bytes / nranks; in place: in is this rank's chunk of out */
  PCL_REF_BUF_SCATTER, /* out = bytes / nranks; in place: out is this rank's chunk of in */
} pcl_ref_buf_t;

/* *want = what output float i of `rank` must hold when rank r's input float j was
 * pcl_ref_value(r, j, salt), cn floats making one chunk (bytes / 4 / nranks); 0 where the
 * collective leaves that float undefined (reduce: every rank but the root). */
typedef int (*pcl_ref_want_t)(int nranks, int rank, uint64_t i, uint64_t cn, unsigned salt,
                              float *want);

typedef struct {
  const char *name;   /* --coll, and the CSV's first column */
  int coll;           /* the plans' collective (PCL_PLAN_COLL_*) */
  const char *a_plan; /* "an allreduce": what a --plan of another collective is not */
  const char *what;   /* the reference, for the header line */
  /* The default plans, opt-in: <plan_dir>/<n>gpu_<plan_algo>_{inplace,outofplace}.json; a NULL
   * plan_algo means the one-phase allreduce set (default and opt-in, picked by size). */
  const char *plan_dir, *plan_algo;
  pcl_ref_buf_t buf;
  int chunked;     /* one chunk per rank: sizes are multiples of 16 x ranks */
  int both_places; /* without plans, both placements are measured (else in place alone) */
  pcl_ref_kernel_of_t kernel_of;
  cudaError_t (*launch)(int nranks, const pcl_ref_args_t *a, int blocks, int threads,
                        cudaStream_t st);
  uint64_t (*half_bytes)(int nranks, uint64_t max_bytes); /* scratch half for sizes up to max */
  pcl_ref_want_t want;
} pcl_ref_coll_t;

/* Small integers as floats: every partial sum of up to 8 ranks is exact in any order. */
static inline float pcl_ref_value(int rank, uint64_t i, unsigned salt) {
  return (float)((int)((i * 7 + (uint64_t)rank * 13 + salt) % 31) - 15);
}

static inline float pcl_ref_sum_at(int nranks, uint64_t at, unsigned salt) {
  float want = pcl_ref_value(0, at, salt);
  for (int r = 1; r < nranks; r++)
    want += pcl_ref_value(r, at, salt);
  return want;
}

static inline int pcl_ref_want_sum(int nranks, int rank, uint64_t i, uint64_t cn, unsigned salt,
                                   float *want) {
  *want = pcl_ref_sum_at(nranks, i, salt);
  return 1;
}

/* The concatenation of the inputs, chunks of cn floats. */
static inline int pcl_ref_want_gather(int nranks, int rank, uint64_t i, uint64_t cn, unsigned salt,
                                      float *want) {
  *want = pcl_ref_value((int)(i / cn), i % cn, salt);
  return 1;
}

/* The sum of chunk `rank`. */
static inline int pcl_ref_want_scatter(int nranks, int rank, uint64_t i, uint64_t cn, unsigned salt,
                                       float *want) {
  *want = pcl_ref_sum_at(nranks, (uint64_t)rank * cn + i, salt);
  return 1;
}

/* The root's input (root 0). */
static inline int pcl_ref_want_root_input(int nranks, int rank, uint64_t i, uint64_t cn,
                                          unsigned salt, float *want) {
  *want = pcl_ref_value(0, i, salt);
  return 1;
}

/* The sum on the root (rank 0) alone. */
static inline int pcl_ref_want_root_sum(int nranks, int rank, uint64_t i, uint64_t cn,
                                        unsigned salt, float *want) {
  *want = pcl_ref_sum_at(nranks, i, salt);
  return rank == 0;
}

/* Row 0 is the default. */
static const pcl_ref_coll_t pcl_ref_colls[] = {
    {"allreduce", PCL_PLAN_COLL_ALLREDUCE, "an allreduce", "one-phase LL16 allreduce (fp32 sum)",
     "allreduce", NULL, PCL_REF_BUF_WHOLE, 0, 0, pcl_ref_allreduce_kernel_of,
     pcl_ref_allreduce_launch, pcl_ref_allreduce_half_bytes, pcl_ref_want_sum},
    {"allgather", PCL_PLAN_COLL_ALLGATHER, "an allgather",
     "one-shot LL16 allgather (fp32; size = total output, each rank's input = size / ranks)",
     "allgather", "ll", PCL_REF_BUF_GATHER, 1, 1, pcl_ref_allgather_kernel_of,
     pcl_ref_allgather_launch, pcl_ref_allgather_half_bytes, pcl_ref_want_gather},
    {"reducescatter", PCL_PLAN_COLL_REDUCESCATTER, "a reduce-scatter",
     "one-shot LL16 reducescatter (fp32 sum; size = total input, each rank's output = size / "
     "ranks)",
     "reducescatter", "ll", PCL_REF_BUF_SCATTER, 1, 1, pcl_ref_reducescatter_kernel_of,
     pcl_ref_reducescatter_launch, pcl_ref_reducescatter_half_bytes, pcl_ref_want_scatter},
    {"allreduce2", PCL_PLAN_COLL_ALLREDUCE, "an allreduce",
     "two-phase LL16 allreduce (fp32 sum; reduce-scatter, then allgather, in one kernel)",
     "allreduce", "ll2", PCL_REF_BUF_WHOLE, 1, 1, pcl_ref_allreduce2_kernel_of,
     pcl_ref_allreduce2_launch, pcl_ref_allreduce2_half_bytes, pcl_ref_want_sum},
    {"broadcast", PCL_PLAN_COLL_BROADCAST, "a broadcast", "LL16 broadcast from rank 0 (fp32)",
     "broadcast", "ll", PCL_REF_BUF_WHOLE, 0, 1, pcl_ref_broadcast_kernel_of,
     pcl_ref_broadcast_launch, pcl_ref_broadcast_half_bytes, pcl_ref_want_root_input},
    {"reduce", PCL_PLAN_COLL_REDUCE, "a reduce",
     "LL16 reduce to rank 0 (fp32 sum; only the root's output is checked)", "reduce", "ll",
     PCL_REF_BUF_WHOLE, 0, 1, pcl_ref_reduce_kernel_of, pcl_ref_reduce_launch,
     pcl_ref_reduce_half_bytes, pcl_ref_want_root_sum},
    {"allreduce_simple", PCL_PLAN_COLL_ALLREDUCE, "an allreduce",
     "Simple allreduce (fp32 sum; plain stores into peers' scratch, 3 semaphore syncs per call)",
     "allreduce", "simple", PCL_REF_BUF_WHOLE, 1, 1, pcl_ref_allreduce_simple_kernel_of,
     pcl_ref_allreduce_simple_launch, pcl_ref_allreduce_simple_half_bytes, pcl_ref_want_sum},
    {"allreduce_simple_pipe", PCL_PLAN_COLL_ALLREDUCE, "an allreduce",
     "pipelined Simple allreduce (fp32 sum; as allreduce_simple, 16 KiB units, 2 syncs each)",
     "allreduce", "simple_pipe", PCL_REF_BUF_WHOLE, 1, 1, pcl_ref_allreduce_simple_pipe_kernel_of,
     pcl_ref_allreduce_simple_pipe_launch, pcl_ref_allreduce_simple_half_bytes, pcl_ref_want_sum},
};

/* The row of --coll `name`, NULL for none. */
static inline const pcl_ref_coll_t *pcl_ref_coll_find(const char *name) {
  for (size_t k = 0; k < sizeof(pcl_ref_colls) / sizeof(pcl_ref_colls[0]); k++)
    if (!strcmp(pcl_ref_colls[k].name, name))
      return &pcl_ref_colls[k];
  return NULL;
}

/* Each rank's input and output bytes for a message (plan.h's semantics, without a plan: the
 * reference runs sizes no plan takes too). */
static inline void pcl_ref_buffer_bytes(const pcl_ref_coll_t *c, int nranks, uint64_t bytes,
                                        uint64_t *in, uint64_t *out) {
  *in = *out = bytes;
  if (c->buf == PCL_REF_BUF_GATHER)
    *in = bytes / (uint64_t)nranks;
  else if (c->buf == PCL_REF_BUF_SCATTER)
    *out = bytes / (uint64_t)nranks;
}

#endif
