/* SPDX-License-Identifier: MIT
 * planccl-autoregbench: what automatic registration costs a workload whose buffers move inside
 * the allocator's memory: two processes, each with one cudaMalloc pool, allreduce calls cycling
 * through buffers at offsets that differ per rank; per call time of the first pass and later ones:
 * the host call (where registration happens) and the call with its stream synchronised. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "bench_spawn.h"
#include "bench_time.h"

#define MAX_PASSES 16

typedef struct {
  ncclUniqueId id;
  int id_ready;
  bench_barrier_t bar;
  const char *lib;
  size_t bytes, pool;
  int offsets, passes, ngpus;
  /* rank 0's, us per call: the host call alone (vote, registration, launch), and with the
   * stream synchronised after it */
  double call_med[MAX_PASSES], call_p90[MAX_PASSES], call_max[MAX_PASSES];
  double med[MAX_PASSES];
  int wrong[2];
} shared_t;

static struct {
  ncclResult_t (*get_id)(ncclUniqueId *);
  ncclResult_t (*init)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*destroy)(ncclComm_t);
} nccl;

static int load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "autoregbench: %s\n", dlerror());
    return 0;
  }
  *(void **)&nccl.get_id = dlsym(h, "ncclGetUniqueId");
  *(void **)&nccl.init = dlsym(h, "ncclCommInitRank");
  *(void **)&nccl.allreduce = dlsym(h, "ncclAllReduce");
  *(void **)&nccl.destroy = dlsym(h, "ncclCommDestroy");
  return nccl.get_id && nccl.init && nccl.allreduce && nccl.destroy;
}

/* Call i of a pass: rank r reads buffer (i + r) and writes buffer (i + r + K/2) of K (mod K). */
static size_t buf_of(int i, int rank, int k, int out) {
  return (size_t)((i + rank + (out ? k / 2 : 0)) % k);
}

static int rank_main(int rank, void *arg) {
  shared_t *sh = arg;
  const int k = sh->offsets;
  const size_t n = sh->bytes / sizeof(float);
  const size_t step = (sh->pool / (size_t)k & ~(size_t)4095) / sizeof(float); /* 4 KiB apart */
  float *pool = NULL, *host = NULL;
  double *t = calloc(2 * (size_t)k, sizeof(double)), *tc = t + k;
  ncclComm_t comm = NULL;
  cudaStream_t s = NULL;
  int rc = 1;
  if (t == NULL || !load(sh->lib) || cudaSetDevice(rank % sh->ngpus) != cudaSuccess ||
      cudaMalloc((void **)&pool, sh->pool) != cudaSuccess ||
      cudaMallocHost((void **)&host, sh->bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    goto out;
  for (size_t i = 0; i < n; i++)
    host[i] = (float)(rank + 1);
  if (rank == 0) {
    if (nccl.get_id(&sh->id) != ncclSuccess)
      goto out;
    __atomic_store_n(&sh->id_ready, 1, __ATOMIC_RELEASE);
  }
  while (!__atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE))
    ;
  if (nccl.init(&comm, 2, sh->id, rank) != ncclSuccess)
    goto out;
  for (int p = 0; p < sh->passes; p++) {
    for (int i = 0; i < k; i++) {
      float *in = pool + buf_of(i, rank, k, 0) * step, *o = pool + buf_of(i, rank, k, 1) * step;
      /* The output poisoned (NaN): a call forwarded to a NCCL that computes nothing shows. */
      if (cudaMemcpyAsync(in, host, sh->bytes, cudaMemcpyHostToDevice, s) != cudaSuccess ||
          cudaMemsetAsync(o, 0xff, sh->bytes, s) != cudaSuccess ||
          cudaStreamSynchronize(s) != cudaSuccess || bench_barrier_wait(&sh->bar) != 0)
        goto out;
      const double a = bench_now_us();
      if (nccl.allreduce(in, o, n, ncclFloat, ncclSum, comm, s) != ncclSuccess)
        goto out;
      tc[i] = bench_now_us() - a;
      if (cudaStreamSynchronize(s) != cudaSuccess)
        goto out;
      t[i] = bench_now_us() - a;
      float got[2] = {0, 0};
      if (cudaMemcpy(&got[0], o, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(&got[1], o + n - 1, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        goto out;
      sh->wrong[rank] += got[0] != 3.0f || got[1] != 3.0f;
    }
    double p90;
    const double med = bench_sorted_stats(t, k, 0.9, &p90),
                 call = bench_sorted_stats(tc, k, 0.9, &p90);
    if (rank == 0) {
      sh->med[p] = med;
      sh->call_med[p] = call;
      sh->call_p90[p] = p90;
      sh->call_max[p] = tc[k - 1];
    }
  }
  rc = 0;
out:
  if (rc != 0)
    bench_barrier_abort(&sh->bar);
  if (comm != NULL)
    nccl.destroy(comm);
  cudaFree(pool);
  cudaFreeHost(host);
  if (s != NULL)
    cudaStreamDestroy(s);
  free(t);
  return rc;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: planccl-autoregbench --lib LIBNCCL [-b BYTES] [-k OFFSETS] [-p PASSES] "
      "[--pool MIB] [-g NGPUS]\n"
      "  two processes on NGPUS GPUs (1: sharing one), allreduce of BYTES (1M) cycling through\n"
      "  OFFSETS (96) buffers of one cudaMalloc pool (256 MiB), rank r at buffer i + r;\n"
      "  PLANCCL_AUTO_REG defaults to 2 here.\n");
}

int main(int argc, char **argv) {
  shared_t *sh = bench_shm_alloc(sizeof(*sh));
  if (sh == NULL)
    return 1;
  sh->bytes = 1u << 20;
  sh->offsets = 96;
  sh->passes = 3;
  sh->pool = 256u << 20;
  sh->ngpus = 1;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--lib") && v)
      sh->lib = argv[++i];
    else if (!strcmp(argv[i], "-b") && v)
      sh->bytes = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "-k") && v)
      sh->offsets = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-p") && v)
      sh->passes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pool") && v)
      sh->pool = strtoull(argv[++i], NULL, 0) << 20;
    else if (!strcmp(argv[i], "-g") && v)
      sh->ngpus = atoi(argv[++i]);
    else {
      usage();
      return 2;
    }
  }
  if (sh->lib == NULL || sh->offsets < 2 || sh->passes < 1 || sh->passes > MAX_PASSES ||
      sh->ngpus < 1 || sh->bytes < sizeof(float) ||
      (sh->pool / (size_t)sh->offsets & ~(size_t)4095) < sh->bytes) {
    usage();
    return 2;
  }
  setenv("PLANCCL_AUTO_REG", "2", 0);
  if (bench_barrier_init(&sh->bar, 2, 1) != 0)
    return 1;
  printf("# planccl-autoregbench: %s, allreduce %zu B, %d buffers in a %zu MiB pool, 2 ranks on "
         "%d GPU(s), PLANCCL_AUTO_REG=%s\n",
         sh->lib, sh->bytes, sh->offsets, sh->pool >> 20, sh->ngpus, getenv("PLANCCL_AUTO_REG"));
  if (bench_spawn(2, rank_main, sh, "autoregbench", 600, 10, &sh->bar) != 0) {
    printf("# result: failed\n");
    return 1;
  }
  printf("# %6s %14s %12s %12s %14s\n", "pass", "call_med_us", "call_p90_us", "call_max_us",
         "synced_med_us");
  for (int p = 0; p < sh->passes; p++)
    printf("  %6d %14.1f %12.1f %12.1f %14.1f\n", p + 1, sh->call_med[p], sh->call_p90[p],
           sh->call_max[p], sh->med[p]);
  printf("# wrong sums: %d, %d\n# result: %s\n", sh->wrong[0], sh->wrong[1],
         sh->wrong[0] + sh->wrong[1] == 0 ? "ok" : "WRONG");
  return sh->wrong[0] + sh->wrong[1] == 0 ? 0 : 1;
}
