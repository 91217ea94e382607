/* SPDX-License-Identifier: MIT
 * Per-call configs and suspend/resume on a planned communicator: two processes on whatever GPUs
 * there are (one is enough), libplanccl over the recording fake NCCL, which computes nothing, so
 * an allreduce that comes out right ran on planccl's kernels and an untouched one was forwarded.
 * ncclAllReduceConfig with config NULL runs the plan, with a config it is forwarded; between
 * ncclCommSuspend and ncclCommResume every call is refused, after it the plan runs again. Exits
 * 77 without a GPU. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "nccl_compat_int.h"
#include "shim_mp.h"

#define COUNT 256 /* 1 KB of floats: a planned size of the default 2-GPU plans */
#define CFG ((const pcl_coll_config_t *)(uintptr_t)0xc0f1) /* never read by planccl */

typedef struct {
  ncclUniqueId id;
  int ready;
  shim_mp_barrier_t bar;
  int ngpus;
  char log[2][256];
} shared_t;

/* An in-place allreduce of rank + 1 through ncclAllReduceConfig: 1 when it came out planned (3),
 * 0 when untouched (forwarded to the fake), -1 on an error or anything else. */
static int allreduce(ncclComm_t comm, float *d, cudaStream_t s, int rank,
                     const pcl_coll_config_t *cfg) {
  float h[COUNT];
  for (int i = 0; i < COUNT; i++)
    h[i] = (float)(rank + 1);
  if (cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice) != cudaSuccess ||
      ncclAllReduceConfig(d, d, COUNT, ncclFloat, ncclSum, comm, s, cfg) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess ||
      cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
    return -1;
  int planned = 1, untouched = 1;
  for (int i = 0; i < COUNT; i++) {
    planned &= h[i] == 3.0f;
    untouched &= h[i] == (float)(rank + 1);
  }
  return planned ? 1 : untouched ? 0 : -1;
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  float *d = NULL;
  cudaStream_t s = NULL;
  (void)nranks;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&d, COUNT * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init(&sh->id, &sh->ready, rank, &comm) == ncclSuccess, 3);
  PCL_MP_CHECK(allreduce(comm, d, s, rank, NULL) == 1, 4); /* NULL: the plain call, planned */
  PCL_MP_CHECK(allreduce(comm, d, s, rank, CFG) == 0, 5);  /* a config: forwarded */
  PCL_MP_CHECK(allreduce(comm, d, s, rank, NULL) == 1, 6);
  PCL_MP_CHECK(ncclCommSuspend(comm, 1) == ncclSuccess, 7);
  PCL_MP_CHECK(ncclAllReduce(d, d, COUNT, ncclFloat, ncclSum, comm, s) == ncclInvalidUsage, 8);
  PCL_MP_CHECK(allreduce(comm, d, s, rank, NULL) == -1, 8);
  PCL_MP_CHECK(ncclCommResume(comm) == ncclSuccess, 9);
  PCL_MP_CHECK(allreduce(comm, d, s, rank, NULL) == 1, 10); /* planned again */
  shim_mp_barrier(&sh->bar);
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 11);
  comm = NULL;
out:
  shim_mp_release(comm, d, NULL, s);
  return rc;
}

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  if (sh == NULL)
    return 1;
  sh->ngpus = shim_mp_gpu_count();
  if (sh->ngpus == 0) {
    printf("shim_config: no GPU: skipped\n");
    return 77;
  }
  shim_mp_log_names(sh->log, 2, "shim_config");
  int codes[2] = {0, 0};
  int rc = pcl_mp_run(2, rank_main, sh, 120, codes);
  printf("shim_config: rank codes %d %d\n", codes[0], codes[1]);
  shim_mp_logs(sh->log, 2, rc != 0);
  printf("shim_config: %s\n", rc == 0 ? "passed" : "FAILED");
  return rc == 0 ? 0 : 1;
}
