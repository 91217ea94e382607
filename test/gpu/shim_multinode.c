/* SPDX-License-Identifier: MIT
 * Multi-node communicators through the NCCL API: processes posing as hosts (PLANCCL_HOST_ID) run
 * the opt-in multi-node plans (memory channels inside a host, TCP port channels between hosts)
 * over libplanccl and the recording fake NCCL, which computes nothing: a right result ran on
 * planccl's kernels. Also the refusals: hosts of unequal rank counts run pass-through. 77 without
 * a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define NR_MAX 8
#define MAXN (1 << 18) /* floats of the largest buffer (1 MiB) */

typedef struct {
  const char *name;
  int nranks;
  const char *hosts[NR_MAX]; /* PLANCCL_HOST_ID of each rank */
  /* Which collectives have plans for the shape (none: every rank runs pass-through); the others
   * are forwarded (allreduce checked). */
  int allreduce;
  int allgather;        /* an allgather plan exists (none at 4 x 2) */
  int reducescatter;    /* a reduce-scatter plan exists (2 x 4 and 4 x 2: the hierarchical ones) */
  const char *log_line; /* a line rank 0's log must hold */
  int dies;             /* rank 1's process ends after one call (peer_dies below) */
} scenario_t;

typedef struct {
  ncclUniqueId id;
  int ready, ngpus;
  shim_mp_barrier_t bar;
  const scenario_t *sc;
  char log[NR_MAX][256];
} shared_t;

/* 1 when d[i] == v + ((i + off) % 7) * k for i < n. */
static int holds_from(const float *d, size_t n, float v, float k, size_t off) {
  float *h = malloc(n * sizeof(float));
  int ok = h != NULL && cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (size_t i = 0; ok && i < n; i++)
    ok = h[i] == v + (float)((i + off) % 7) * k;
  if (!ok && h != NULL)
    for (size_t i = 0; i < n; i++)
      if (h[i] != v + (float)((i + off) % 7) * k) {
        fprintf(stderr, "element %zu is %g, want %g\n", i, h[i], v + (float)((i + off) % 7) * k);
        break;
      }
  free(h);
  return ok;
}

/* Allgather of cnt floats per rank, rank k's input (k + 1) + (i % 7); in place when the input is
 * the rank's own slot of out. */
static int allgather_ok(ncclComm_t comm, float *in, float *out, size_t cnt, int rank, int n,
                        int inplace, cudaStream_t s) {
  float *src = inplace ? out + (size_t)rank * cnt : in;
  if (!shim_mp_fill(out, cnt * (size_t)n, SHIM_MP_POISON) ||
      !shim_mp_fill(src, cnt, (float)(rank + 1)))
    return 0;
  if (ncclAllGather(src, out, cnt, ncclFloat, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return 0;
  for (int k = 0; k < n; k++)
    if (!holds_from(out + (size_t)k * cnt, cnt, (float)(k + 1), 1, 0)) {
      fprintf(stderr, "allgather of %zu floats: slot %d is wrong\n", cnt, k);
      return 0;
    }
  return 1;
}

/* Reduce-scatter of n x cnt floats, every rank's input (rank + 1) + (i % 7) over the whole
 * buffer; in place when the output is the rank's own slot of the input. */
static int reducescatter_ok(ncclComm_t comm, float *in, float *out, size_t cnt, int rank, int n,
                            int inplace, cudaStream_t s) {
  float *dst = inplace ? in + (size_t)rank * cnt : out;
  if (!shim_mp_fill(in, cnt * (size_t)n, (float)(rank + 1)) ||
      (!inplace && !shim_mp_fill(out, cnt, SHIM_MP_POISON)))
    return 0;
  if (ncclReduceScatter(in, dst, cnt, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return 0;
  return holds_from(dst, cnt, (float)(n * (n + 1) / 2), (float)n, (size_t)rank * cnt);
}

/* A captured allreduce, replayed with new inputs each time. */
static int graph_ok(ncclComm_t comm, float *in, float *out, size_t cnt, int rank, int n,
                    shared_t *sh, cudaStream_t s) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  int ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  ok = ok && ncclAllReduce(in, out, cnt, ncclFloat, ncclSum, comm, s) == ncclSuccess;
  ok = cudaStreamEndCapture(s, &g) == cudaSuccess && ok;
  ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
  for (int rep = 0; ok && rep < 3; rep++) {
    ok = shim_mp_fill(in, cnt, (float)(rank + 1 + rep)) && shim_mp_fill(out, cnt, SHIM_MP_POISON);
    shim_mp_barrier_n(&sh->bar, n); /* no rank refills while a peer's last replay still reads */
    ok = ok && cudaGraphLaunch(ge, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
    ok = ok && holds_from(out, cnt, (float)(n * (n + 1) / 2 + n * rep), (float)n, 0);
    shim_mp_barrier_n(&sh->bar, n);
  }
  if (ge != NULL)
    cudaGraphExecDestroy(ge);
  if (g != NULL)
    cudaGraphDestroy(g);
  return ok;
}

/* A peer whose process ends mid-job (a crash, a kill): after one good allgather (and a barrier,
 * so its last transfers have landed) rank 1 exits without a word. Rank 0's next allgather waits
 * for data that never comes; its TCP receivers see the connections end without a goodbye, the
 * proxy fails, and that aborts the waiting kernel: cudaStreamSynchronize returns within seconds
 * even though nothing polls for errors; ncclCommGetAsyncError says ncclRemoteError (what
 * PyTorch's watchdog acts on), a later planned call is refused, and ncclCommAbort is prompt.
 * Before, the kernel waited forever (PLANCCL_TIMEOUT_S unset). */
static int peer_dies(ncclComm_t *comm, float *in, float *out, int rank, int n, cudaStream_t s,
                     shared_t *sh) {
  int rc = 0;
  ncclResult_t st = ncclSuccess;
  struct timespec t0, t1;
  PCL_MP_CHECK(allgather_ok(*comm, in, out, 1024, rank, n, 0, s), 20);
  shim_mp_barrier_n(&sh->bar, n);
  if (rank == 1)
    _exit(0);
  /* Launched before the failure is seen, the kernel must end by itself; seen first, the call
   * is refused at once. */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (ncclAllGather(in, out, 1024, ncclFloat, *comm, s) == ncclSuccess) {
    PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 22);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("shim_multinode: peer_dies: the waiting kernel ended %.2f s after its launch\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    fflush(stdout);
    PCL_MP_CHECK(t1.tv_sec - t0.tv_sec < 20, 22);
  } else {
    printf("shim_multinode: peer_dies: the call was refused (the failure was seen first)\n");
    fflush(stdout);
  }
  PCL_MP_CHECK(ncclCommGetAsyncError(*comm, &st) == ncclSuccess, 23);
  if (st != ncclRemoteError)
    fprintf(stderr, "peer_dies: async error %d (%s), want ncclRemoteError\n", (int)st,
            ncclGetErrorString(st));
  PCL_MP_CHECK(st == ncclRemoteError, 23);
  PCL_MP_CHECK(ncclAllGather(in, out, 1024, ncclFloat, *comm, s) != ncclSuccess, 24);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  PCL_MP_CHECK(ncclCommAbort(*comm) == ncclSuccess, 25);
  *comm = NULL;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  PCL_MP_CHECK(t1.tv_sec - t0.tv_sec < 5, 25);
  fflush(stderr);
  PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "without a goodbye") >= 1, 26);
out:
  return rc;
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  const scenario_t *sc = sh->sc;
  int rc = 0;
  ncclComm_t comm = NULL;
  float *in = NULL, *out = NULL;
  cudaStream_t s = NULL;
  /* Floats per rank: 64 bytes (near the plans' smallest), 4 KiB, 32 KiB. */
  const size_t sizes[] = {16, 1024, 8192};
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  setenv("PLANCCL_HOST_ID", sc->hosts[rank], 1);
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&in, MAXN * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&out, MAXN * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init_n(&sh->id, &sh->ready, rank, nranks, &comm) == ncclSuccess, 3);
  if (sc->dies) {
    rc = peer_dies(&comm, in, out, rank, nranks, s, sh);
    goto out;
  }
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    size_t c = sizes[k];
    PCL_MP_CHECK(shim_mp_allreduce_checked_n(comm, in, out, c * (size_t)nranks, s, rank, nranks,
                                             sc->allreduce),
                 4);
    PCL_MP_CHECK(shim_mp_allreduce_checked_n(comm, in, in, c * (size_t)nranks, s, rank, nranks,
                                             sc->allreduce),
                 5);
    if (sc->allgather) {
      PCL_MP_CHECK(allgather_ok(comm, in, out, c, rank, nranks, 0, s), 6);
      PCL_MP_CHECK(allgather_ok(comm, in, out, c, rank, nranks, 1, s), 7);
    }
    if (!sc->reducescatter)
      continue;
    PCL_MP_CHECK(reducescatter_ok(comm, in, out, c, rank, nranks, 0, s), 8);
    PCL_MP_CHECK(reducescatter_ok(comm, in, out, c, rank, nranks, 1, s), 9);
  }
  /* A size no plan takes (12 bytes) goes to NCCL on every rank alike. */
  PCL_MP_CHECK(shim_mp_allreduce_checked_n(comm, in, out, 3, s, rank, nranks, 0), 10);
  if (sc->allreduce)
    PCL_MP_CHECK(graph_ok(comm, in, out, 4096, rank, nranks, sh, s), 11);
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 12);
  comm = NULL;
  fflush(stderr);
  if (rank == 0 && shim_mp_log_count(sh->log[0], sc->log_line) < 1)
    fprintf(stderr, "%s: rank 0's log lacks \"%s\"\n", sc->name, sc->log_line);
  PCL_MP_CHECK(rank != 0 || shim_mp_log_count(sh->log[0], sc->log_line) >= 1, 13);
out:
  shim_mp_release(comm, in, out, s);
  return rc;
}

/* The multi-node plans of the shapes above: allreduce hierarchical, allgather, reduce-scatter
 * (direct at 2 x 1 and 2 x 2, hierarchical at 2 x 4 and 4 x 2). */
static const char *const plan_files[] = {
    "extra/allreduce/2x2gpu_hier_ll_inplace.json",
    "extra/allreduce/2x2gpu_hier_ll_outofplace.json",
    "extra/allgather/2x2gpu_ll_inplace.json",
    "extra/allgather/2x2gpu_ll_outofplace.json",
    "extra/reducescatter/2x2gpu_ll_inplace.json",
    "extra/reducescatter/2x2gpu_ll_outofplace.json",
    "extra/allgather/2x1gpu_ll_inplace.json",
    "extra/allgather/2x1gpu_ll_outofplace.json",
    "extra/reducescatter/2x1gpu_ll_inplace.json",
    "extra/reducescatter/2x1gpu_ll_outofplace.json",
    "extra/allreduce/2x4gpu_hier_ll_inplace.json",
    "extra/allreduce/2x4gpu_hier_ll_outofplace.json",
    "extra/allgather/2x4gpu_ll_inplace.json",
    "extra/allgather/2x4gpu_ll_outofplace.json",
    "extra/allreduce/4x2gpu_hier_ll_inplace.json",
    "extra/allreduce/4x2gpu_hier_ll_outofplace.json",
    "extra/reducescatter/2x4gpu_hier_ll_inplace.json",
    "extra/reducescatter/2x4gpu_hier_ll_outofplace.json",
    "extra/reducescatter/4x2gpu_hier_ll_inplace.json",
    "extra/reducescatter/4x2gpu_hier_ll_outofplace.json",
};

static const scenario_t scenarios[] = {
    {.name = "2 hosts x 2 ranks",
     .nranks = 4,
     .hosts = {"pcl-a", "pcl-a", "pcl-b", "pcl-b"},
     .allreduce = 1,
     .allgather = 1,
     .reducescatter = 1,
     .log_line = "multi-node: 2 hosts x 2 ranks, port channels between hosts over tcp"},
    {.name = "2 hosts x 1 rank",
     .nranks = 2,
     .hosts = {"pcl-a", "pcl-b"},
     .allgather = 1,
     .reducescatter = 1,
     .log_line = "multi-node: 2 hosts x 1 ranks, port channels between hosts over tcp"},
    {.name = "2 hosts x 4 ranks",
     .nranks = 8,
     .hosts = {"pcl-a", "pcl-a", "pcl-a", "pcl-a", "pcl-b", "pcl-b", "pcl-b", "pcl-b"},
     .allreduce = 1,
     .allgather = 1,
     .reducescatter = 1,
     .log_line = "multi-node: 2 hosts x 4 ranks, port channels between hosts over tcp"},
    {.name = "4 hosts x 2 ranks",
     .nranks = 8,
     .hosts = {"pcl-a", "pcl-a", "pcl-b", "pcl-b", "pcl-c", "pcl-c", "pcl-d", "pcl-d"},
     .allreduce = 1,
     .reducescatter = 1,
     .log_line = "multi-node: 4 hosts x 2 ranks, port channels between hosts over tcp"},
    {.name = "2 hosts x 1 rank, rank 1 dies",
     .nranks = 2,
     .hosts = {"pcl-a", "pcl-b"},
     .allgather = 1,
     .reducescatter = 1,
     .log_line = "multi-node: 2 hosts x 1 ranks, port channels between hosts over tcp",
     .dies = 1},
    {.name = "hosts of 3 and 1 ranks",
     .nranks = 4,
     .hosts = {"pcl-a", "pcl-a", "pcl-a", "pcl-b"},
     .log_line = "hosts hold different numbers of ranks"},
    {.name = "ranks not grouped by host",
     .nranks = 4,
     .hosts = {"pcl-a", "pcl-b", "pcl-a", "pcl-b"},
     .log_line = "ranks are not grouped by host"},
};

/* With an argument, only the scenarios whose name holds it run (a failure looked at alone). */
int main(int argc, char **argv) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  int failed = 0;
  if (sh == NULL)
    return 1;
  setenv("PLANCCL_DEBUG", "INFO", 1);
  /* COLL: each call's path (plan or NCCL, and why) lands in the log shown on a failure. */
  setenv("PLANCCL_DEBUG_SUBSYS", "INIT,COLL", 1);
  setenv("PLANCCL_NET", "auto", 1);
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
    if (argc > 1 && strstr(scenarios[i].name, argv[1]) == NULL)
      continue;
    memset(sh, 0, sizeof(*sh));
    sh->sc = &scenarios[i];
    printf("shim_multinode: %s\n", scenarios[i].name);
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc =
        shim_mp_main_n("shim_multinode", plan_files, sizeof(plan_files) / sizeof(plan_files[0]),
                       scenarios[i].nranks, rank_main, sh, &sh->ngpus, sh->log);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("shim_multinode: %s: %.1f s\n", scenarios[i].name,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    if (rc == 77)
      return 77;
    failed |= rc != 0;
  }
  printf("shim_multinode: %s\n", failed ? "FAILED" : "passed");
  return failed;
}
