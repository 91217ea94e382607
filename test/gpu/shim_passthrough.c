/* SPDX-License-Identifier: MIT
 * Every collective through planccl in pass-through mode (everything forwarded to the real NCCL),
 * results checked on the host, in four process models: one process driving both GPUs
 * (ncclCommInitAll + groups), one process with ncclCommInitRankConfig inside a group (as
 * nccl-tests does), one thread per GPU, and one process per GPU (forked before any CUDA call).
 * Linked against libplanccl.so as a user links libnccl; the real NCCL is found by discovery
 * unless PLANCCL_NCCL_LIB is set; with PCL_TEST_TORCH_LIB=<.../torch/lib/libtorch_cuda.so> that
 * library is loaded first, as `import torch` would, so discovery finds the wheel's NCCL next to it.
 * Exits 77 with fewer than 2 GPUs.
 * Usage: shim_passthrough [--only all|group|thread|proc] [--count N] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define NR 2
#define SKIP 77

static size_t g_count = 262147; /* odd, not a multiple of anything convenient */

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define NCCL_OK(call)                                                                              \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "%s:%d %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_),    \
              ncclGetLastError(NULL));                                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* One rank driven by this thread. */
struct rank_ctx {
  int rank, dev;
  ncclComm_t comm;
  cudaStream_t stream;
  float *send, *recv; /* device, NR * count each */
  float *host;        /* host staging, NR * count */
};

enum {
  OP_ALLREDUCE,
  OP_ALLGATHER,
  OP_REDUCESCATTER,
  OP_BROADCAST,
  OP_BCAST,
  OP_REDUCE,
  OP_ALLTOALL,
  OP_GATHER,
  OP_SCATTER,
  OP_SENDRECV,
  OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Bcast",
    "Reduce",    "AlltoAll",  "Gather",        "Scatter",   "Send/Recv"};

/* Input element i of rank r for op (small integers: exact in fp32). */
static float input(int op, int r, size_t i) {
  size_t c = g_count;
  switch (op) {
  case OP_ALLREDUCE:
    return (float)(r + 1 + (int)(i % 7));
  case OP_ALLGATHER:
    return (float)(r * 1000 + (int)(i % 997));
  case OP_REDUCESCATTER:
    return (float)(r + (int)((i / c) * 3) + (int)(i % 5));
  case OP_BROADCAST:
    return r == 1 ? (float)(i % 301) * 3 : -1.0f;
  case OP_BCAST:
    return r == 0 ? (float)(i % 211 + 5) : -2.0f;
  case OP_REDUCE:
    return (float)(r * 10 + (int)(i % 5));
  case OP_ALLTOALL:
    return (float)(r * 100 + (int)(i / c) * 10 + (int)(i % 10));
  case OP_GATHER:
    return (float)(r * 7 + (int)(i % 113));
  case OP_SCATTER:
    return r == 0 ? (float)((int)(i / c) * 11 + (int)(i % 17)) : -3.0f;
  default:
    return (float)(r * 13 + (int)(i % 101));
  }
}

/* Expected output element i on rank r; returns 0 when the element is not checked. */
static int expected(int op, int r, size_t i, float *want) {
  size_t c = g_count;
  int n = NR;
  switch (op) {
  case OP_ALLREDUCE:
    *want = (float)(n * (n + 1) / 2 + n * (int)(i % 7));
    return i < c;
  case OP_ALLGATHER:
    *want = input(op, (int)(i / c), i % c);
    return 1;
  case OP_REDUCESCATTER: {
    if (i >= c)
      return 0;
    float s = 0;
    for (int k = 0; k < n; k++)
      s += input(op, k, r * c + i);
    *want = s;
    return 1;
  }
  case OP_BROADCAST:
    *want = input(op, 1, i);
    return i < c;
  case OP_BCAST:
    *want = input(op, 0, i);
    return i < c;
  case OP_REDUCE:
    *want = (float)((n - 1) * 10 + (int)(i % 5));
    return r == 0 && i < c;
  case OP_ALLTOALL:
    *want = input(op, (int)(i / c), r * c + i % c);
    return 1;
  case OP_GATHER:
    *want = input(op, (int)(i / c), i % c);
    return r == 1;
  case OP_SCATTER:
    *want = input(op, 0, r * c + i);
    return i < c;
  default:
    *want = input(op, (r + n - 1) % n, i);
    return i < c;
  }
}

static int issue(int op, struct rank_ctx *x) {
  size_t c = g_count;
  int n = NR;
  switch (op) {
  case OP_ALLREDUCE:
    NCCL_OK(ncclAllReduce(x->send, x->recv, c, ncclFloat, ncclSum, x->comm, x->stream));
    break;
  case OP_ALLGATHER:
    NCCL_OK(ncclAllGather(x->send, x->recv, c, ncclFloat, x->comm, x->stream));
    break;
  case OP_REDUCESCATTER:
    NCCL_OK(ncclReduceScatter(x->send, x->recv, c, ncclFloat, ncclSum, x->comm, x->stream));
    break;
  case OP_BROADCAST:
    NCCL_OK(ncclBroadcast(x->send, x->recv, c, ncclFloat, 1, x->comm, x->stream));
    break;
  case OP_BCAST:
    NCCL_OK(ncclBcast(x->recv, c, ncclFloat, 0, x->comm, x->stream));
    break;
  case OP_REDUCE:
    NCCL_OK(ncclReduce(x->send, x->recv, c, ncclFloat, ncclMax, 0, x->comm, x->stream));
    break;
  case OP_ALLTOALL:
    NCCL_OK(ncclAlltoAll(x->send, x->recv, c, ncclFloat, x->comm, x->stream));
    break;
  case OP_GATHER:
    NCCL_OK(ncclGather(x->send, x->recv, c, ncclFloat, 1, x->comm, x->stream));
    break;
  case OP_SCATTER:
    NCCL_OK(ncclScatter(x->send, x->recv, c, ncclFloat, 0, x->comm, x->stream));
    break;
  default:
    NCCL_OK(ncclSend(x->send, c, ncclFloat, (x->rank + 1) % n, x->comm, x->stream));
    NCCL_OK(ncclRecv(x->recv, c, ncclFloat, (x->rank + n - 1) % n, x->comm, x->stream));
  }
  return 0;
}

static int setup(struct rank_ctx *x) {
  size_t bytes = NR * g_count * sizeof(float);
  CUDA_OK(cudaSetDevice(x->dev));
  CUDA_OK(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&x->send, bytes));
  CUDA_OK(cudaMalloc((void **)&x->recv, bytes));
  x->host = malloc(bytes);
  return x->host == NULL;
}

static int teardown(struct rank_ctx *x) {
  CUDA_OK(cudaSetDevice(x->dev));
  NCCL_OK(ncclCommDestroy(x->comm));
  CUDA_OK(cudaFree(x->send));
  CUDA_OK(cudaFree(x->recv));
  CUDA_OK(cudaStreamDestroy(x->stream));
  free(x->host);
  return 0;
}

/* Runs every collective on the nx ranks this thread drives (one group per collective). */
static int run_all_ops(struct rank_ctx *xs, int nx, const char *model) {
  size_t total = NR * g_count;
  for (int op = 0; op < OP_COUNT; op++) {
    for (int k = 0; k < nx; k++) {
      struct rank_ctx *x = &xs[k];
      for (size_t i = 0; i < total; i++)
        x->host[i] = input(op, x->rank, i);
      CUDA_OK(cudaSetDevice(x->dev));
      CUDA_OK(cudaMemcpy(x->send, x->host, total * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(x->recv, x->host, total * sizeof(float), cudaMemcpyHostToDevice));
    }
    NCCL_OK(ncclGroupStart());
    for (int k = 0; k < nx; k++)
      if (issue(op, &xs[k]))
        return 1;
    NCCL_OK(ncclGroupEnd());
    for (int k = 0; k < nx; k++) {
      struct rank_ctx *x = &xs[k];
      CUDA_OK(cudaSetDevice(x->dev));
      CUDA_OK(cudaStreamSynchronize(x->stream));
      CUDA_OK(cudaMemcpy(x->host, x->recv, total * sizeof(float), cudaMemcpyDeviceToHost));
      size_t bad = 0, first = 0;
      float want = 0, got = 0;
      for (size_t i = 0; i < total; i++) {
        float w;
        if (!expected(op, x->rank, i, &w) || x->host[i] == w)
          continue;
        if (bad++ == 0) {
          first = i;
          want = w;
          got = x->host[i];
        }
      }
      if (bad) {
        fprintf(stderr, "[%s] %s rank %d: %zu wrong elements, first [%zu] = %g, want %g\n", model,
                op_names[op], x->rank, bad, first, got, want);
        return 1;
      }
    }
  }
  printf("[%s] ranks", model);
  for (int k = 0; k < nx; k++)
    printf(" %d", xs[k].rank);
  printf(": all %d collectives correct\n", OP_COUNT);
  return 0;
}

static int check_gpus(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < NR) {
    fprintf(stderr, "shim_passthrough: needs %d GPUs, found %d: skipped\n", NR, n);
    return SKIP;
  }
  return 0;
}

/* ---- model 1: one process, both GPUs, ncclCommInitAll ---- */
static int model_initall(void) {
  struct rank_ctx xs[NR];
  memset(xs, 0, sizeof(xs));
  ncclComm_t comms[NR];
  int devs[NR];
  for (int r = 0; r < NR; r++)
    devs[r] = r;
  NCCL_OK(ncclCommInitAll(comms, NR, devs));
  for (int r = 0; r < NR; r++) {
    xs[r].rank = r;
    xs[r].dev = r;
    xs[r].comm = comms[r];
    int got = -1;
    NCCL_OK(ncclCommUserRank(comms[r], &got));
    NCCL_OK(ncclCommCuDevice(comms[r], &xs[r].dev));
    if (got != r)
      return fprintf(stderr, "InitAll: comm %d has rank %d\n", r, got), 1;
    if (setup(&xs[r]))
      return 1;
  }
  if (run_all_ops(xs, NR, "initall"))
    return 1;
  for (int r = 0; r < NR; r++)
    if (teardown(&xs[r]))
      return 1;
  return 0;
}

/* ---- model 2: one process, ncclCommInitRankConfig for every GPU inside one group ---- */
static int model_group_init(void) {
  struct rank_ctx xs[NR];
  memset(xs, 0, sizeof(xs));
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < NR; r++) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    CUDA_OK(cudaSetDevice(r));
    NCCL_OK(ncclCommInitRankConfig(&xs[r].comm, NR, id, r, &cfg));
  }
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < NR; r++) {
    xs[r].rank = r;
    xs[r].dev = r;
    if (setup(&xs[r]))
      return 1;
  }
  if (run_all_ops(xs, NR, "group-init"))
    return 1;
  for (int r = 0; r < NR; r++)
    if (teardown(&xs[r]))
      return 1;
  return 0;
}

/* ---- model 3: one thread per GPU ---- */
struct thread_arg {
  ncclUniqueId id;
  int rank, result;
};

static int thread_rank_body(struct thread_arg *a) {
  struct rank_ctx x;
  memset(&x, 0, sizeof(x));
  x.rank = x.dev = a->rank;
  CUDA_OK(cudaSetDevice(x.dev));
  NCCL_OK(ncclCommInitRank(&x.comm, NR, a->id, x.rank));
  if (setup(&x) || run_all_ops(&x, 1, "threads"))
    return 1;
  return teardown(&x);
}

static void *thread_main(void *p) {
  struct thread_arg *a = p;
  a->result = thread_rank_body(a);
  return NULL;
}

static int model_threads(void) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  pthread_t t[NR];
  struct thread_arg args[NR];
  for (int r = 0; r < NR; r++) {
    args[r].id = id;
    args[r].rank = r;
    args[r].result = 1;
    pthread_create(&t[r], NULL, thread_main, &args[r]);
  }
  int failed = 0;
  for (int r = 0; r < NR; r++) {
    pthread_join(t[r], NULL);
    failed |= args[r].result;
  }
  return failed;
}

/* ---- model 4: one process per GPU, forked before any CUDA call in the parent ---- */
static int proc_rank(int rank, int fd_in, int fd_out) {
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    if (write(fd_out, &id, sizeof(id)) != (ssize_t)sizeof(id))
      return 1;
  } else if (read(fd_in, &id, sizeof(id)) != (ssize_t)sizeof(id)) {
    return 1;
  }
  int skip = check_gpus();
  if (skip)
    return skip;
  struct rank_ctx x;
  memset(&x, 0, sizeof(x));
  x.rank = x.dev = rank;
  CUDA_OK(cudaSetDevice(x.dev));
  NCCL_OK(ncclCommInitRank(&x.comm, NR, id, x.rank));
  if (setup(&x) || run_all_ops(&x, 1, "processes"))
    return 1;
  return teardown(&x);
}

static int model_processes(void) {
  int p[2];
  if (pipe(p) != 0)
    return 1;
  pid_t pids[NR];
  for (int r = 0; r < NR; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      int rc = proc_rank(r, p[0], p[1]);
      fflush(stdout); /* _exit skips stdio: the verdict line must reach the log */
      _exit(rc);
    }
  }
  close(p[0]);
  close(p[1]);
  int result = 0;
  for (int r = 0; r < NR; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (code == SKIP && result == 0)
      result = SKIP;
    else if (code != 0 && code != SKIP)
      result = 1;
  }
  return result;
}

int main(int argc, char **argv) {
  const char *only = "";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
      g_count = strtoull(argv[++i], 0, 0);
  }
  const char *torch = getenv("PCL_TEST_TORCH_LIB");
  if (torch != NULL && torch[0] != '\0' && dlopen(torch, RTLD_NOW | RTLD_LOCAL) == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", torch, dlerror());
    return 1;
  }
  Dl_info di;
  if (dladdr((void *)&ncclAllReduce, &di) && di.dli_fname)
    printf("shim_passthrough: ncclAllReduce comes from %s\n", di.dli_fname);
  int failed = 0;
  /* Processes first: the parent must not have touched CUDA before it forks. */
  if (!only[0] || strcmp(only, "proc") == 0) {
    int r = model_processes();
    if (r == SKIP)
      return SKIP;
    failed |= r;
  }
  if (only[0] && strcmp(only, "proc") == 0)
    return failed;
  int skip = check_gpus();
  if (skip)
    return skip;
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v < 22800) {
    fprintf(stderr, "ncclGetVersion: %d (is a real NCCL loaded?)\n", v);
    return 1;
  }
  printf("shim_passthrough: real NCCL version %d\n", v);
  if (!only[0] || strcmp(only, "all") == 0)
    failed |= model_initall();
  if (!only[0] || strcmp(only, "group") == 0)
    failed |= model_group_init();
  if (!only[0] || strcmp(only, "thread") == 0)
    failed |= model_threads();
  printf("shim_passthrough: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
