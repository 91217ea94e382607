/* SPDX-License-Identifier: MIT
 * Kernel faults through the NCCL API: two processes on whatever GPUs there are (one is enough:
 * they share it), libplanccl over the recording fake NCCL, so every allreduce that comes out
 * right ran on planccl's own kernels. A rank that never makes its call leaves the other's kernel
 * stopped by PLANCCL_TIMEOUT_S, ncclCommGetAsyncError reports it, the next planned call is
 * refused at once, ncclCommAbort returns within 1 s, and a new communicator works; without a
 * timeout, ncclCommAbort ends a spinning kernel within 1 s. Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define COUNT 256 /* 1 KB of floats: a planned size of the default 2-GPU plans */

typedef struct {
  ncclUniqueId id[4];
  int ready[4];
  shim_mp_barrier_t bar;
  int ngpus;
  char log[2][256]; /* each rank's stderr file */
} shared_t;

/* Communicator k (shim_mp.h). */
static ncclResult_t init(shared_t *sh, int k, int rank, ncclComm_t *comm) {
  return shim_mp_init(&sh->id[k], &sh->ready[k], rank, comm);
}

/* One planned allreduce of rank + 1 on both ranks: 3 everywhere (the fake computes nothing). */
static int checked_allreduce(ncclComm_t comm, float *d, cudaStream_t s, int rank) {
  float h[COUNT];
  for (int i = 0; i < COUNT; i++)
    h[i] = (float)(rank + 1);
  if (cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice) != cudaSuccess ||
      ncclAllReduce(d, d, COUNT, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess ||
      cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
    return 0;
  for (int i = 0; i < COUNT; i++)
    if (h[i] != 3.0f)
      return 0;
  return 1;
}

/* PLANCCL_TIMEOUT_S=1: rank 1 skips a call. */
static int rank_timeout(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL, again = NULL;
  float *d = NULL;
  cudaStream_t s = NULL;
  (void)nranks;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&d, COUNT * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(init(sh, 0, rank, &comm) == ncclSuccess, 3);
  PCL_MP_CHECK(checked_allreduce(comm, d, s, rank), 4); /* planned: the fake adds nothing */
  shim_mp_barrier(&sh->bar);
  if (rank == 0) {
    ncclResult_t e = ncclSuccess;
    double t0 = pcl_mp_now();
    PCL_MP_CHECK(ncclAllReduce(d, d, COUNT, ncclFloat, ncclSum, comm, s) == ncclSuccess, 5);
    PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 6);
    double waited = pcl_mp_now() - t0;
    fprintf(stdout, "shim_faults: a peer that never calls: rank 0 stopped after %.2f s\n", waited);
    PCL_MP_CHECK(waited > 0.9 && waited < 3.0, 7);
    PCL_MP_CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e != ncclSuccess, 8);
    /* Refused at once from now on: the ranks' flags no longer agree. */
    t0 = pcl_mp_now();
    PCL_MP_CHECK(ncclAllReduce(d, d, COUNT, ncclFloat, ncclSum, comm, s) != ncclSuccess, 9);
    PCL_MP_CHECK(pcl_mp_now() - t0 < 0.5, 9);
    t0 = pcl_mp_now();
    PCL_MP_CHECK(ncclCommAbort(comm) == ncclSuccess, 10);
    comm = NULL;
    fprintf(stdout, "shim_faults: ncclCommAbort after the timeout: %.3f s\n", pcl_mp_now() - t0);
    PCL_MP_CHECK(pcl_mp_now() - t0 < 1.0, 10);
    fflush(stderr);
    PCL_MP_CHECK(shim_mp_log_count(sh->log[0], "hang report: rank 0") > 0, 11);
  }
  shim_mp_barrier(&sh->bar);
  if (comm != NULL)
    PCL_MP_CHECK(ncclCommAbort(comm) == ncclSuccess, 12);
  comm = NULL;
  /* The GPU and the process are fine: a new communicator computes right. */
  PCL_MP_CHECK(init(sh, 1, rank, &again) == ncclSuccess, 13);
  PCL_MP_CHECK(checked_allreduce(again, d, s, rank), 14);
  PCL_MP_CHECK(ncclCommDestroy(again) == ncclSuccess, 15);
  again = NULL;
out:
  if (comm != NULL)
    ncclCommAbort(comm);
  if (again != NULL)
    ncclCommAbort(again);
  cudaFree(d);
  if (s != NULL)
    cudaStreamDestroy(s);
  fflush(stderr);
  return rc;
}

/* No timeout: rank 0's kernel spins until rank 0 aborts its communicator. */
static int rank_abort(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  float *d = NULL;
  cudaStream_t s = NULL;
  (void)nranks;
  if (freopen(sh->log[rank], "a", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&d, COUNT * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(init(sh, 2, rank, &comm) == ncclSuccess, 3);
  PCL_MP_CHECK(checked_allreduce(comm, d, s, rank), 4);
  shim_mp_barrier(&sh->bar);
  if (rank == 0) {
    PCL_MP_CHECK(ncclAllReduce(d, d, COUNT, ncclFloat, ncclSum, comm, s) == ncclSuccess, 5);
    usleep(300 * 1000);
    PCL_MP_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, 6); /* still spinning */
    double t0 = pcl_mp_now();
    PCL_MP_CHECK(ncclCommAbort(comm) == ncclSuccess, 7);
    comm = NULL;
    PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 8);
    double took = pcl_mp_now() - t0;
    fprintf(stdout, "shim_faults: ncclCommAbort of a spinning kernel: done in %.3f s\n", took);
    PCL_MP_CHECK(took < 1.0, 9);
  }
  shim_mp_barrier(&sh->bar);
out:
  if (comm != NULL)
    ncclCommAbort(comm);
  cudaFree(d);
  if (s != NULL)
    cudaStreamDestroy(s);
  fflush(stderr);
  return rc;
}

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  if (sh == NULL)
    return 1;
  sh->ngpus = shim_mp_gpu_count();
  if (sh->ngpus == 0) {
    printf("shim_faults: no GPU: skipped\n");
    return 77;
  }
  shim_mp_log_names(sh->log, 2, "shim_faults");
  setenv("PLANCCL_TIMEOUT_S", "1", 1);
  int codes[2] = {0, 0};
  int rc = pcl_mp_run(2, rank_timeout, sh, 120, codes);
  printf("shim_faults: timeout scenario: rank codes %d %d\n", codes[0], codes[1]);
  unsetenv("PLANCCL_TIMEOUT_S");
  int rc2 = pcl_mp_run(2, rank_abort, sh, 120, codes);
  printf("shim_faults: abort scenario: rank codes %d %d\n", codes[0], codes[1]);
  shim_mp_logs(sh->log, 2, rc != 0 || rc2 != 0); /* the ranks' logs say why */
  printf("shim_faults: %s\n", rc == 0 && rc2 == 0 ? "passed" : "FAILED");
  return rc == 0 && rc2 == 0 ? 0 : 1;
}
