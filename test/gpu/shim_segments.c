/* SPDX-License-Identifier: MIT
 * A call that runs only in segments, through the NCCL API: the 8-rank Simple reduce above 585 MiB,
 * where its root's scratch (7 inputs) is too large to address whole. Eight processes share the
 * GPUs there are (one is enough), libplanccl over the fake NCCL, which computes nothing, so a right
 * result ran on planccl's kernels. Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define NRANKS 8
#define COUNT (590ull << 18) /* floats: 590 MiB, beyond the 585 MiB a whole call can take */

typedef struct {
  ncclUniqueId id;
  int ready, ngpus;
  char log[NRANKS][256];
} shared_t;

/* Reduce of COUNT floats to `root`, every rank's input (rank + 1) + (i % 7): the root must hold
 * 36 + 8 (i % 7); in place when the root's output is its input. */
static int reduce_ok(ncclComm_t comm, float *in, float *out, int rank, int root, int inplace,
                     cudaStream_t s) {
  float *dst = inplace && rank == root ? in : out;
  if (!shim_mp_fill(in, COUNT, (float)(rank + 1)) ||
      (rank == root && !inplace && !shim_mp_fill(out, COUNT, SHIM_MP_POISON)))
    return 0;
  if (ncclReduce(in, dst, COUNT, ncclFloat, ncclSum, root, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return 0;
  if (rank != root)
    return 1;
  if (!shim_mp_holds(dst, COUNT, 36.0f, 8.0f)) {
    fprintf(stderr, "rank %d: reduce of %llu floats to root %d (%s) is wrong\n", rank, COUNT, root,
            inplace ? "in place" : "out of place");
    return 0;
  }
  return 1;
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  float *in = NULL, *out = NULL;
  cudaStream_t s = NULL;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&in, COUNT * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&out, COUNT * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init_n(&sh->id, &sh->ready, rank, nranks, &comm) == ncclSuccess, 3);
  PCL_MP_CHECK(reduce_ok(comm, in, out, rank, 3, 0, s), 4);
  PCL_MP_CHECK(reduce_ok(comm, in, out, rank, 6, 1, s), 5);
  fflush(stderr);
  /* Every rank ran it on the plan, in segments of the communicator's scratch. */
  PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "path=plan:reduce_8gpu_simple") >= 1, 6);
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 7);
  comm = NULL;
out:
  shim_mp_release(comm, in, out, s);
  return rc;
}

static const char *const plan_files[] = {"extra/reduce/8gpu_simple_inplace.json",
                                         "extra/reduce/8gpu_simple_outofplace.json"};

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  if (sh == NULL)
    return 1;
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "COLL", 1); /* each call's path, checked above */
  return shim_mp_main_n("shim_segments", plan_files, sizeof(plan_files) / sizeof(plan_files[0]),
                        NRANKS, rank_main, sh, &sh->ngpus, sh->log);
}
