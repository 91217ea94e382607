/* SPDX-License-Identifier: MIT
 * planccl-bench: an NCCL-API benchmark that loads one or more NCCL-compatible libraries with
 * dlopen (planccl and the real NCCL) and measures them side by side in one run: eager and
 * CUDA-graph time per call over a size sweep, one thread per GPU, plus the host path of a call. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench_launch.h"

#define MAX_LIBS 4
#define MAX_GPUS 8
#define MAX_SIZES 64

typedef struct {
  const char *label, *path;
  void *handle;
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  const char *(*error_string)(ncclResult_t);
} lib_t;

typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER } coll_t;
static const char *coll_names[] = {"allreduce", "allgather", "reducescatter"};

typedef struct {
  int ngpus, iters, warmup, graph_iters, graph_launches, hostpath;
  coll_t coll;
  size_t sizes[MAX_SIZES];
  int nsizes;
} opts_t;

typedef struct {
  double eager_us[MAX_SIZES], graph_us[MAX_SIZES];
  int wrong[MAX_SIZES];
  double host_median_us, host_p99_us;
  double launch_median_us; /* cudaMemsetAsync of 16 bytes: what one CUDA launch costs here */
  double launch_p99_us;
  double kernel_median_us; /* one empty kernel launch: the floor under any kernel's host path */
  /* Launch floors by variant (bench_launch.h); median < 0: not measured (driver unavailable). */
  double floor_median_us[PCL_BENCH_LAUNCH_COUNT], floor_p99_us[PCL_BENCH_LAUNCH_COUNT];
} result_t;

typedef struct {
  const opts_t *o;
  lib_t *lib;
  ncclUniqueId id;
  int rank;
  result_t *res; /* written by rank 0 */
  pthread_barrier_t *bar;
  int failed;
} worker_t;

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s failed: %s\n", w->rank, #call, cudaGetErrorString(e_));         \
      w->failed = 1;                                                                               \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)
#define NCCL_OK(call)                                                                              \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s failed: %s\n", w->rank, #call, w->lib->error_string(r_));       \
      w->failed = 1;                                                                               \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

#define LAUNCH_OK(call)                                                                            \
  do {                                                                                             \
    int e_ = (call);                                                                               \
    if (e_ != 0) {                                                                                 \
      fprintf(stderr, "rank %d: %s failed: error %d\n", w->rank, #call, e_);                       \
      w->failed = 1;                                                                               \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

/* Times HOST_N runs of `stmt` (API entry to return), draining the stream every 256 runs (and
 * meeting the other ranks there when `barrier`: a collective needs its peers); rank 0 stores the
 * median and p99 in w->res->MED and w->res->P99. */
enum { HOST_N = 4096 };
#define HOST_TIMES(w, MED, P99, barrier, stmt)                                                     \
  do {                                                                                             \
    static _Thread_local double t_[HOST_N];                                                        \
    for (int i_ = 0; i_ < HOST_N; i_++) {                                                          \
      if (i_ % 256 == 0) {                                                                         \
        CUDA_OK(cudaStreamSynchronize(s));                                                         \
        if (barrier)                                                                               \
          pthread_barrier_wait((w)->bar);                                                          \
      }                                                                                            \
      double a_ = now_us();                                                                        \
      stmt;                                                                                        \
      t_[i_] = now_us() - a_;                                                                      \
    }                                                                                              \
    CUDA_OK(cudaStreamSynchronize(s));                                                             \
    qsort(t_, HOST_N, sizeof(double), cmp_double);                                                 \
    if ((w)->rank == 0) {                                                                          \
      (w)->res->MED = t_[HOST_N / 2];                                                              \
      (w)->res->P99 = t_[(HOST_N * 99) / 100];                                                     \
    }                                                                                              \
  } while (0)

static int load_lib(lib_t *l) {
  l->handle = dlopen(l->path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!l->handle) {
    fprintf(stderr, "cannot open %s: %s\n", l->path, dlerror());
    return -1;
  }
#define SYM(field, name)                                                                           \
  if (!(*(void **)&l->field = dlsym(l->handle, name))) {                                           \
    fprintf(stderr, "%s lacks %s\n", l->path, name);                                               \
    return -1;                                                                                     \
  }
  SYM(get_unique_id, "ncclGetUniqueId");
  SYM(init_rank, "ncclCommInitRank");
  SYM(destroy, "ncclCommDestroy");
  SYM(all_reduce, "ncclAllReduce");
  SYM(all_gather, "ncclAllGather");
  SYM(reduce_scatter, "ncclReduceScatter");
  SYM(error_string, "ncclGetErrorString");
#undef SYM
  return 0;
}

/* Element counts: allreduce count = bytes/4; allgather/reducescatter count is per rank. */
static size_t elems(const opts_t *o, size_t bytes) {
  size_t n = bytes / sizeof(float);
  if (o->coll != COLL_ALLREDUCE)
    n /= (size_t)o->ngpus;
  return n;
}

static ncclResult_t issue(worker_t *w, ncclComm_t comm, float *in, float *out, size_t count,
                          cudaStream_t s) {
  switch (w->o->coll) {
  case COLL_ALLREDUCE:
    return w->lib->all_reduce(in, out, count, ncclFloat, ncclSum, comm, s);
  case COLL_ALLGATHER:
    return w->lib->all_gather(in, out, count, ncclFloat, comm, s);
  default:
    return w->lib->reduce_scatter(in, out, count, ncclFloat, ncclSum, comm, s);
  }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Fills input with (rank+1) + i%7 so every output element has a known value. */
static int check_output(worker_t *w, const float *out_host, size_t count) {
  int n = w->o->ngpus, wrong = 0;
  size_t total = w->o->coll == COLL_ALLGATHER ? count * (size_t)n : count;
  for (size_t i = 0; i < total; i++) {
    float expect;
    if (w->o->coll == COLL_ALLREDUCE) {
      expect = (float)(n * (n + 1) / 2) + (float)n * (float)(i % 7);
    } else if (w->o->coll == COLL_ALLGATHER) {
      expect = (float)(i / count + 1) + (float)((i % count) % 7);
    } else {
      size_t gi = (size_t)w->rank * count + i;
      expect = (float)(n * (n + 1) / 2) + (float)n * (float)(gi % 7);
    }
    if (out_host[i] != expect)
      wrong++;
  }
  return wrong;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  const opts_t *o = w->o;
  ncclComm_t comm = NULL;
  cudaStream_t s;
  CUDA_OK(cudaSetDevice(w->rank));
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  NCCL_OK(w->lib->init_rank(&comm, o->ngpus, w->id, w->rank));
  size_t max_bytes = o->sizes[o->nsizes - 1];
  float *in, *out, *host;
  size_t max_out = max_bytes + 64;
  CUDA_OK(cudaMalloc((void **)&in, max_bytes + 64));
  CUDA_OK(cudaMalloc((void **)&out, max_out));
  CUDA_OK(cudaMallocHost((void **)&host, max_out));
  size_t in_elems = (max_bytes + 64) / sizeof(float);
  for (size_t i = 0; i < in_elems; i++)
    host[i] = (float)(w->rank + 1) + (float)(i % 7);
  CUDA_OK(cudaMemcpy(in, host, in_elems * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));

  for (int si = 0; si < o->nsizes; si++) {
    size_t count = elems(o, o->sizes[si]);
    if (count == 0)
      continue;
    size_t out_count = o->coll == COLL_ALLGATHER ? count * (size_t)o->ngpus : count;
    const float *src = in;
    if (o->coll == COLL_REDUCESCATTER)
      src = in; /* send holds ngpus*count elements */
    /* Correctness once per size, then warm-up. */
    CUDA_OK(cudaMemset(out, 0, out_count * sizeof(float)));
    NCCL_OK(issue(w, comm, (float *)src, out, count, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host, out, out_count * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = check_output(w, host, count);
    for (int i = 0; i < o->warmup; i++)
      NCCL_OK(issue(w, comm, (float *)src, out, count, s));
    CUDA_OK(cudaStreamSynchronize(s));
    pthread_barrier_wait(w->bar);
    CUDA_OK(cudaEventRecord(e0, s));
    for (int i = 0; i < o->iters; i++)
      NCCL_OK(issue(w, comm, (float *)src, out, count, s));
    CUDA_OK(cudaEventRecord(e1, s));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    double eager = (double)ms * 1e3 / o->iters;

    double graph = -1;
    if (o->graph_iters > 0 && o->sizes[si] <= (64u << 20)) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      pthread_barrier_wait(w->bar);
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < o->graph_iters; i++)
        NCCL_OK(issue(w, comm, (float *)src, out, count, s));
      CUDA_OK(cudaStreamEndCapture(s, &g));
      CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
      CUDA_OK(cudaGraphLaunch(ge, s));
      CUDA_OK(cudaStreamSynchronize(s));
      pthread_barrier_wait(w->bar);
      CUDA_OK(cudaEventRecord(e0, s));
      for (int i = 0; i < o->graph_launches; i++)
        CUDA_OK(cudaGraphLaunch(ge, s));
      CUDA_OK(cudaEventRecord(e1, s));
      CUDA_OK(cudaEventSynchronize(e1));
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      graph = (double)ms * 1e3 / ((double)o->graph_launches * o->graph_iters);
      CUDA_OK(cudaGraphExecDestroy(ge));
      CUDA_OK(cudaGraphDestroy(g));
      /* The graph's last result must be right too. */
      CUDA_OK(cudaMemcpy(host, out, out_count * sizeof(float), cudaMemcpyDeviceToHost));
      wrong += check_output(w, host, count);
    }
    pthread_barrier_wait(w->bar);
    if (w->rank == 0) {
      w->res->eager_us[si] = eager;
      w->res->graph_us[si] = graph;
    }
    __atomic_fetch_add(&w->res->wrong[si], wrong, __ATOMIC_RELAXED);
  }

  if (o->hostpath) {
    /* Host cost of one call: API entry to return, smallest size, stream drained every 256. */
    size_t count = elems(o, o->sizes[0]);
    if (count == 0)
      count = 1;
    HOST_TIMES(w, host_median_us, host_p99_us, 1, NCCL_OK(issue(w, comm, in, out, count, s)));
    /* The floors under any library's host path: bare CUDA launches on the same stream. */
    HOST_TIMES(w, launch_median_us, launch_p99_us, 0, CUDA_OK(cudaMemsetAsync(out, 0, 16, s)));
    pcl_bench_launcher_t lch;
    (void)pcl_bench_launcher_init(&lch);
    for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++) {
      if (w->rank == 0)
        w->res->floor_median_us[v] = w->res->floor_p99_us[v] = -1;
      if (!pcl_bench_launch_available(&lch, v))
        continue;
      HOST_TIMES(w, floor_median_us[v], floor_p99_us[v], 0,
                 LAUNCH_OK(pcl_bench_launch(&lch, v, s)));
    }
    if (w->rank == 0)
      w->res->kernel_median_us = w->res->floor_median_us[PCL_BENCH_EMPTY_RT];
  }
  pthread_barrier_wait(w->bar);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(in);
  cudaFree(out);
  cudaFreeHost(host);
  NCCL_OK(w->lib->destroy(comm));
  cudaStreamDestroy(s);
  return NULL;
}

static int run_lib(const opts_t *o, lib_t *lib, result_t *res) {
  worker_t w[MAX_GPUS];
  pthread_t th[MAX_GPUS];
  pthread_barrier_t bar;
  ncclUniqueId id;
  memset(res, 0, sizeof(*res));
  if (lib->get_unique_id(&id) != ncclSuccess) {
    fprintf(stderr, "%s: ncclGetUniqueId failed\n", lib->label);
    return -1;
  }
  pthread_barrier_init(&bar, NULL, (unsigned)o->ngpus);
  for (int r = 0; r < o->ngpus; r++) {
    w[r] = (worker_t){.o = o, .lib = lib, .id = id, .rank = r, .res = res, .bar = &bar};
    pthread_create(&th[r], NULL, worker, &w[r]);
  }
  int failed = 0;
  for (int r = 0; r < o->ngpus; r++) {
    pthread_join(th[r], NULL);
    failed |= w[r].failed;
  }
  pthread_barrier_destroy(&bar);
  return failed ? -1 : 0;
}

/* ---- which path planccl took per size (its PLANCCL_DEBUG=INFO "pcl_path" lines) ---- */

static char path_log[256];
static const char *path_coll[] = {"AllReduce", "AllGather", "ReduceScatter"};

/* Asks planccl (through its environment, read once at its first use) to log the path of each
 * (collective, size class) to a file of ours; left alone when the user set PLANCCL_DEBUG. */
static void path_log_setup(void) {
  if (getenv("PLANCCL_DEBUG") != NULL)
    return;
  snprintf(path_log, sizeof(path_log), "/tmp/planccl-bench-paths-%d.log", (int)getpid());
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "COLL", 1);
  setenv("PLANCCL_DEBUG_FILE", path_log, 1);
}

/* The path logged for (coll, bytes): "plan:NAME", "nccl", or "?" when unknown. */
static void path_of(coll_t coll, size_t bytes, char *out, size_t len) {
  snprintf(out, len, "?");
  FILE *f = path_log[0] ? fopen(path_log, "r") : NULL;
  char line[1024], want[96];
  snprintf(want, sizeof(want), "pcl_path coll=%s bytes=%zu ", path_coll[coll], bytes);
  while (f && fgets(line, sizeof(line), f)) {
    const char *p = strstr(line, want), *q = p ? strstr(p, " path=") : NULL;
    if (q == NULL)
      continue;
    q += 6;
    size_t n = strcspn(q, " \n");
    snprintf(out, len, "%.*s", (int)n, q);
    break;
  }
  if (f)
    fclose(f);
}

/* The breakdown under the host path: one line per launch floor (best run, rank 0), then each
 * library's call above planccl's own launch (the interpreter-shaped driver launch). Every line
 * starts with "# host path" so the scripts that grep the host-path line keep all of them. */
static void print_floors(const lib_t *libs, int nlibs, const result_t *res, const result_t *f) {
  printf("# host path breakdown: median and p99 of %d calls each, 1 block of 32 threads, "
         "interpreter-shaped = %u B of kernel parameters and %u B of dynamic shared memory\n",
         HOST_N, pcl_bench_abi_param_bytes(), pcl_bench_abi_smem_bytes());
  printf("# host path floor: %-52s median %7.3f us, p99 %7.3f us\n", "cudaMemsetAsync of 16 bytes",
         f->launch_median_us, f->launch_p99_us);
  for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++) {
    if (f->floor_median_us[v] <= 0)
      printf("# host path floor: %-52s unavailable (no driver entry point)\n",
             pcl_bench_launch_name(v));
    else
      printf("# host path floor: %-52s median %7.3f us, p99 %7.3f us\n", pcl_bench_launch_name(v),
             f->floor_median_us[v], f->floor_p99_us[v]);
  }
  double own = f->floor_median_us[PCL_BENCH_ABI_CU_KERNEL];
  if (own <= 0)
    own = f->floor_median_us[PCL_BENCH_ABI_RT];
  for (int l = 0; l < nlibs; l++)
    if (libs[l].label)
      printf("# host path call: %-52s median %7.3f us, p99 %7.3f us; %+.3f us above the "
             "interpreter-shaped launch\n",
             libs[l].label, res[l].host_median_us, res[l].host_p99_us, res[l].host_median_us - own);
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: planccl-bench --lib LABEL=PATH [--lib LABEL=PATH ...] [options]\n"
      "  --coll allreduce|allgather|reducescatter   (default allreduce)\n"
      "  -b BYTES -e BYTES -f FACTOR                size sweep (default 1K..256M x4)\n"
      "  -n ITERS -w WARMUP                         eager iterations (default 50, 10)\n"
      "  -G ITERS                                   calls per CUDA graph (0 = no graphs; default "
      "20)\n"
      "  -g NGPUS                                   GPUs, one thread each (default 2)\n"
      "  --hostpath                                 also measure the host path of one call and\n"
      "                                             the launch floors under it (one line each)\n"
      "  --repeat R                                 runs per library, order alternating, best kept "
      "(2)\n"
      "Sizes are total bytes of the largest buffer, as in nccl-tests; data type float, op sum.\n");
}

static size_t parse_bytes(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'K':
  case 'k':
    v *= 1024;
    break;
  case 'M':
  case 'm':
    v *= 1024 * 1024;
    break;
  case 'G':
  case 'g':
    v *= 1024.0 * 1024 * 1024;
    break;
  default:
    break;
  }
  return (size_t)v;
}

static void fmt_size(size_t b, char *buf, size_t n) {
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    snprintf(buf, n, "%zuG", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, n, "%zuM", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(buf, n, "%zuK", b >> 10);
  else
    snprintf(buf, n, "%zu", b);
}

int main(int argc, char **argv) {
  opts_t o = {.ngpus = 2,
              .iters = 50,
              .warmup = 10,
              .graph_iters = 20,
              .graph_launches = 10,
              .coll = COLL_ALLREDUCE};
  lib_t libs[MAX_LIBS];
  int nlibs = 0;
  size_t minb = 1024, maxb = 256u << 20;
  double factor = 4;
  int repeat = 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--lib") && v && nlibs < MAX_LIBS) {
      char *eq = strchr(argv[++i], '=');
      if (!eq) {
        usage();
        return 2;
      }
      *eq = '\0';
      libs[nlibs++] = (lib_t){.label = argv[i], .path = eq + 1};
    } else if (!strcmp(a, "--coll") && v) {
      i++;
      if (!strcmp(v, "allreduce"))
        o.coll = COLL_ALLREDUCE;
      else if (!strcmp(v, "allgather"))
        o.coll = COLL_ALLGATHER;
      else if (!strcmp(v, "reducescatter"))
        o.coll = COLL_REDUCESCATTER;
      else {
        usage();
        return 2;
      }
    } else if (!strcmp(a, "-b") && v) {
      minb = parse_bytes(argv[++i]);
    } else if (!strcmp(a, "-e") && v) {
      maxb = parse_bytes(argv[++i]);
    } else if (!strcmp(a, "-f") && v) {
      factor = atof(argv[++i]);
    } else if (!strcmp(a, "-n") && v) {
      o.iters = atoi(argv[++i]);
    } else if (!strcmp(a, "-w") && v) {
      o.warmup = atoi(argv[++i]);
    } else if (!strcmp(a, "-G") && v) {
      o.graph_iters = atoi(argv[++i]);
    } else if (!strcmp(a, "-g") && v) {
      o.ngpus = atoi(argv[++i]);
    } else if (!strcmp(a, "--hostpath")) {
      o.hostpath = 1;
    } else if (!strcmp(a, "--repeat") && v) {
      repeat = atoi(argv[++i]);
    } else {
      usage();
      return 2;
    }
  }
  if (nlibs == 0 || factor <= 1 || minb == 0 || maxb < minb || o.iters < 1 || o.ngpus < 1 ||
      repeat < 1 || o.ngpus > MAX_GPUS) {
    usage();
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < o.ngpus) {
    fprintf(stderr, "planccl-bench: needs %d GPUs, found %d\n", o.ngpus, ndev);
    return 77;
  }
  for (double s = (double)minb; s <= (double)maxb * 1.0001 && o.nsizes < MAX_SIZES; s *= factor)
    o.sizes[o.nsizes++] = (size_t)s;
  path_log_setup();

  static result_t res[MAX_LIBS], one, floors;
  int rc = 0;
  for (int l = 0; l < nlibs; l++) {
    if (load_lib(&libs[l]) != 0) {
      rc = 1;
      libs[l].label = NULL;
    }
  }
  /* Each library runs `repeat` times, in alternating order (A B, then B A), and keeps its best
   * time per size: whichever runs first in a process pays for warming up the host. */
  for (int rep = 0; rep < repeat; rep++) {
    for (int k = 0; k < nlibs; k++) {
      int l = rep % 2 ? nlibs - 1 - k : k;
      if (!libs[l].label)
        continue;
      if (run_lib(&o, &libs[l], &one) != 0) {
        fprintf(stderr, "planccl-bench: %s failed\n", libs[l].label);
        rc = 1;
        libs[l].label = NULL;
        continue;
      }
      result_t *r = &res[l];
      for (int si = 0; si < o.nsizes; si++) {
        if (rep == 0 || one.eager_us[si] < r->eager_us[si])
          r->eager_us[si] = one.eager_us[si];
        if (rep == 0 || (one.graph_us[si] >= 0 && one.graph_us[si] < r->graph_us[si]))
          r->graph_us[si] = one.graph_us[si];
        r->wrong[si] += one.wrong[si];
      }
      if (rep == 0 || one.host_median_us < r->host_median_us) {
        r->host_median_us = one.host_median_us;
        r->host_p99_us = one.host_p99_us;
        r->launch_median_us = one.launch_median_us;
        r->kernel_median_us = one.kernel_median_us;
      }
      /* The floors do not depend on the library: the best of every run, each with its p99. */
      if (o.hostpath) {
        if (floors.launch_median_us == 0 || one.launch_median_us < floors.launch_median_us) {
          floors.launch_median_us = one.launch_median_us;
          floors.launch_p99_us = one.launch_p99_us;
        }
        for (int v = 0; v < PCL_BENCH_LAUNCH_COUNT; v++) {
          if (one.floor_median_us[v] < 0)
            continue;
          double best = floors.floor_median_us[v];
          if (best <= 0 || one.floor_median_us[v] < best) {
            floors.floor_median_us[v] = one.floor_median_us[v];
            floors.floor_p99_us[v] = one.floor_p99_us[v];
          }
        }
      }
    }
  }

  printf("\n# %s, float sum, %d GPUs (one thread each); time per call in us; graph: %d calls "
         "per graph\n",
         coll_names[o.coll], o.ngpus, o.graph_iters);
  printf("%10s", "bytes");
  for (int l = 0; l < nlibs; l++)
    if (libs[l].label)
      printf(" %12s-eager", libs[l].label);
  for (int l = 0; l < nlibs; l++)
    if (libs[l].label)
      printf(" %12s-graph", libs[l].label);
  printf("  wrong  path\n");
  for (int si = 0; si < o.nsizes; si++) {
    char sz[32];
    fmt_size(o.sizes[si], sz, sizeof(sz));
    printf("%10s", sz);
    int wrong = 0;
    for (int l = 0; l < nlibs; l++)
      if (libs[l].label)
        printf(" %18.2f", res[l].eager_us[si]);
    for (int l = 0; l < nlibs; l++) {
      if (!libs[l].label)
        continue;
      if (res[l].graph_us[si] < 0)
        printf(" %18s", "-");
      else
        printf(" %18.2f", res[l].graph_us[si]);
      wrong += res[l].wrong[si];
    }
    char path[128];
    path_of(o.coll, o.sizes[si], path, sizeof(path));
    printf("  %5d  %s\n", wrong, path);
    if (wrong)
      rc = 1;
  }
  if (o.hostpath) {
    char path[128];
    path_of(o.coll, o.sizes[0], path, sizeof(path));
    for (int l = 0; l < nlibs; l++)
      if (libs[l].label)
        printf("# host path of one %s call of %zu bytes (%s; planccl path %s): median %.3f us, "
               "p99 %.3f us; bare launches: cudaMemsetAsync %.3f us, empty kernel %.3f us\n",
               coll_names[o.coll], o.sizes[0], libs[l].label, path, res[l].host_median_us,
               res[l].host_p99_us, res[l].launch_median_us, res[l].kernel_median_us);
    print_floors(libs, nlibs, res, &floors);
  }
  printf("# path: what planccl ran for that size (plan:NAME = its own kernel, nccl = forwarded)\n");
  if (path_log[0])
    unlink(path_log);
  return rc;
}
