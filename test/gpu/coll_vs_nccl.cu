/* SPDX-License-Identifier: MIT
 * Every planned collective through libplanccl.so's NCCL API against the real NCCL (dlopen'ed from
 * PLANCCL_NCCL_LIB) on the same inputs: allreduce, allgather, reducescatter, broadcast and reduce,
 * every dtype and op, in-place and out-of-place, a sparse size sweep from 1 byte to 256 MB (powers
 * of 4, odd sizes and the shipped plans' range ends), in two process models: one process driving
 * both GPUs (ncclCommInitAll + groups) and one process per GPU. Integers must match bitwise,
 * floats within a tolerance. PLANCCL_STATS=1 prints which calls ran on plans; the test fails when
 * none did although the GPUs have peer access. In the process model the small allreduce cases run
 * again on ncclCommSplit / ncclCommShrink children of planccl's comm. Exits 77 with fewer than
 * 2 GPUs.
 * Usage: coll_vs_nccl [--only all|proc] [--quick] */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NR 2
#define SKIP 77
#define MAX_BYTES (256ull << 20)

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define NK(call, what)                                                                             \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "%s:%d %s (%s): %d %s\n", __FILE__, __LINE__, #call, what, (int)r_,          \
              ncclGetLastError(NULL));                                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

enum { C_AR, C_AG, C_RS, C_BC, C_RED, C_N };
static const char *const coll_names[C_N] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                            "reduce"};
static const char *const op_names[5] = {"sum", "prod", "max", "min", "avg"};

/* One NCCL-compatible library: planccl (linked) or the real NCCL (dlopen'ed). */
typedef struct {
  const char *name;
  ncclResult_t (*get_id)(ncclUniqueId *);
  ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*init_all)(ncclComm_t *, int, const int *);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t);
} lib_t;

static lib_t pcl_lib = {"planccl",       ncclGetUniqueId,   ncclCommInitRank, ncclCommInitAll,
                        ncclCommDestroy, ncclGroupStart,    ncclGroupEnd,     ncclAllReduce,
                        ncclAllGather,   ncclReduceScatter, ncclBroadcast,    ncclReduce};
static lib_t real_lib = {"nccl"};

static int load_real(void) {
  const char *path = getenv("PLANCCL_NCCL_LIB");
  if (path == NULL || path[0] == '\0') {
    fprintf(stderr, "PLANCCL_NCCL_LIB must name the real libnccl.so.2\n");
    return 1;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 1;
  }
#define SYM(f, n)                                                                                  \
  if ((*(void **)&real_lib.f = dlsym(h, n)) == NULL) {                                             \
    fprintf(stderr, "%s lacks %s\n", path, n);                                                     \
    return 1;                                                                                      \
  }
  SYM(get_id, "ncclGetUniqueId");
  SYM(init_rank, "ncclCommInitRank");
  SYM(init_all, "ncclCommInitAll");
  SYM(destroy, "ncclCommDestroy");
  SYM(group_start, "ncclGroupStart");
  SYM(group_end, "ncclGroupEnd");
  SYM(all_reduce, "ncclAllReduce");
  SYM(all_gather, "ncclAllGather");
  SYM(reduce_scatter, "ncclReduceScatter");
  SYM(broadcast, "ncclBroadcast");
  SYM(reduce, "ncclReduce");
#undef SYM
  return 0;
}

/* ---- cases ---- */

typedef struct {
  int coll, dtype, op, inplace, root;
  size_t bytes; /* the registry's message size: AG total output, RS total input, else count*es */
} tcase_t;

static size_t dtype_bytes(int t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

static int is_float(int t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

/* Elements per rank of a case (count argument), 0 when the size does not split. */
static size_t case_count(const tcase_t *c) {
  size_t n = c->bytes / dtype_bytes(c->dtype);
  if (c->coll == C_AG || c->coll == C_RS)
    n /= NR;
  return n;
}

static tcase_t *make_cases(int quick, int *ncases) {
  static const size_t small[] = {1,       3,       4,       15,     16,    17,     31,
                                 32,      33,      64,      255,    256,   1000,   1024,
                                 4096,    16384,   65536,   65552,  65568, 262144, 1048576,
                                 2097136, 2097152, 2097184, 4194304};
  static const size_t big[] = {16u << 20, 64u << 20, 256u << 20};
  int cap = 64 * 1024, n = 0;
  tcase_t *cs = (tcase_t *)calloc((size_t)cap, sizeof(tcase_t));
  int nsmall = (int)(sizeof(small) / sizeof(small[0]));
  for (int si = 0; si < nsmall; si++)
    for (int coll = 0; coll < C_N; coll++)
      for (int t = 0; t < (int)ncclNumTypes; t++) {
        if (quick && t != ncclFloat32 && t != ncclBfloat16 && t != ncclInt32)
          continue;
        int reduces = coll == C_AR || coll == C_RS || coll == C_RED;
        for (int op = 0; op < (reduces ? 5 : 1); op++)
          for (int ip = 0; ip < 2 && n < cap; ip++) {
            tcase_t c = {coll, t, op, ip, n % NR, small[si]};
            if (case_count(&c) == 0)
              continue;
            cs[n++] = c;
          }
      }
  if (!quick)
    for (int bi = 0; bi < 3; bi++)
      for (int coll = 0; coll < C_N; coll++)
        for (int ti = 0; ti < 2; ti++)
          for (int ip = 0; ip < 2 && n < cap; ip++) {
            tcase_t c = {coll, ti ? ncclBfloat16 : ncclFloat32, 0, ip, n % NR, big[bi]};
            cs[n++] = c;
          }
  *ncases = n;
  return cs;
}

/* ---- device helpers: inputs, comparison ---- */

/* Small exact values: products and sums of two stay exact in every dtype (fp8 included). */
__device__ static int gen(unsigned long long i, unsigned seed, int rank) {
  unsigned long long x =
      i * 2654435761ull + (unsigned long long)seed * 40503ull + (unsigned long long)rank * 977ull;
  x ^= x >> 17;
  return (int)(x % 5ull);
}

__global__ static void fill_kernel(void *p, size_t n, int dtype, unsigned seed, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    int v = gen(i, seed, rank);
    float f = (float)(v - 2) * 0.5f;
    switch (dtype) {
    case ncclInt8:
      ((int8_t *)p)[i] = (int8_t)(v - 2);
      break;
    case ncclUint8:
      ((uint8_t *)p)[i] = (uint8_t)v;
      break;
    case ncclInt32:
      ((int32_t *)p)[i] = v - 2;
      break;
    case ncclUint32:
      ((uint32_t *)p)[i] = (uint32_t)v;
      break;
    case ncclInt64:
      ((int64_t *)p)[i] = v - 2;
      break;
    case ncclUint64:
      ((uint64_t *)p)[i] = (uint64_t)v;
      break;
    case ncclFloat16:
      ((__half *)p)[i] = __float2half(f);
      break;
    case ncclFloat32:
      ((float *)p)[i] = f;
      break;
    case ncclFloat64:
      ((double *)p)[i] = f;
      break;
    case ncclBfloat16:
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16(f);
      break;
    case ncclFloat8e4m3:
      ((__nv_fp8_e4m3 *)p)[i] = __nv_fp8_e4m3(f);
      break;
    default:
      ((__nv_fp8_e5m2 *)p)[i] = __nv_fp8_e5m2(f);
      break;
    }
  }
}

__device__ static double as_double(const void *p, size_t i, int dtype) {
  switch (dtype) {
  case ncclFloat16:
    return __half2float(((const __half *)p)[i]);
  case ncclFloat32:
    return ((const float *)p)[i];
  case ncclFloat64:
    return ((const double *)p)[i];
  case ncclBfloat16:
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  case ncclFloat8e4m3:
    return (float)((const __nv_fp8_e4m3 *)p)[i];
  default:
    return (float)((const __nv_fp8_e5m2 *)p)[i];
  }
}

/* Counts elements of a (planccl) that differ from b (real NCCL); records the first index. */
__global__ static void compare_kernel(const void *a, const void *b, size_t n, int dtype,
                                      unsigned long long *bad, unsigned long long *first) {
  size_t es =
      dtype == ncclInt8 || dtype == ncclUint8 || dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2
          ? 1
      : dtype == ncclFloat16 || dtype == ncclBfloat16                     ? 2
      : dtype == ncclInt32 || dtype == ncclUint32 || dtype == ncclFloat32 ? 4
                                                                          : 8;
  int flt = dtype == ncclFloat16 || dtype == ncclFloat32 || dtype == ncclFloat64 ||
            dtype == ncclBfloat16 || dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2;
  double tol = dtype == ncclFloat64 ? 1e-12 : dtype == ncclFloat32 ? 1e-6 : 1e-2;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    int diff;
    if (flt) {
      double x = as_double(a, i, dtype), y = as_double(b, i, dtype);
      diff = !(x == y || (x != x && y != y) || fabs(x - y) <= tol * (1.0 + fabs(y)));
    } else {
      diff = 0;
      for (size_t k = 0; k < es; k++)
        diff |= ((const unsigned char *)a)[i * es + k] != ((const unsigned char *)b)[i * es + k];
    }
    if (diff) {
      atomicAdd(bad, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
  }
}

/* ---- one rank ---- */

typedef struct {
  int rank, dev;
  ncclComm_t comm[2]; /* [0] planccl, [1] real */
  cudaStream_t s;
  char *in, *out, *mine;
  unsigned long long *bad; /* host-mapped: [0] count, [1] first index */
  unsigned long long *d_bad;
} rank_t;

static int rank_alloc(rank_t *R) {
  CK(cudaSetDevice(R->dev));
  CK(cudaStreamCreateWithFlags(&R->s, cudaStreamNonBlocking));
  CK(cudaMalloc((void **)&R->in, MAX_BYTES + 256));
  CK(cudaMalloc((void **)&R->out, MAX_BYTES + 256));
  CK(cudaMalloc((void **)&R->mine, MAX_BYTES + 256));
  CK(cudaHostAlloc((void **)&R->bad, 2 * sizeof(unsigned long long), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&R->d_bad, R->bad, 0));
  return 0;
}

static void rank_free(rank_t *R) {
  cudaSetDevice(R->dev);
  cudaFree(R->in);
  cudaFree(R->out);
  cudaFree(R->mine);
  cudaFreeHost(R->bad);
  cudaStreamDestroy(R->s);
}

/* Buffers of a case on rank R: send/recv pointers, the input region to fill, the output region
 * to compare (elements); nothing to compare when *cmp_n is 0. */
static void case_buffers(const tcase_t *c, rank_t *R, char **send, char **recv, char **fill,
                         size_t *fill_n, char **cmp, size_t *cmp_n) {
  size_t es = dtype_bytes(c->dtype), n = case_count(c);
  size_t in_n = c->coll == C_RS ? n * NR : n, out_n = c->coll == C_AG ? n * NR : n;
  char *base = c->inplace ? R->out : R->in;
  *send = base;
  *recv = R->out;
  *fill = base;
  *fill_n = in_n;
  if (c->inplace && c->coll == C_AG)
    *send = *fill = R->out + (size_t)R->rank * n * es;
  if (c->inplace && c->coll == C_RS)
    *recv = R->out + (size_t)R->rank * n * es;
  *cmp = *recv;
  *cmp_n = out_n;
  if (c->coll == C_AG)
    *cmp = R->out;
  if (c->coll == C_RED && R->rank != c->root)
    *cmp_n = 0;
}

static int issue(const lib_t *L, const tcase_t *c, rank_t *R, int which) {
  char *send, *recv, *fill, *cmp;
  size_t fill_n, cmp_n, n = case_count(c);
  case_buffers(c, R, &send, &recv, &fill, &fill_n, &cmp, &cmp_n);
  ncclDataType_t t = (ncclDataType_t)c->dtype;
  ncclRedOp_t op = (ncclRedOp_t)c->op;
  ncclComm_t comm = R->comm[which];
  switch (c->coll) {
  case C_AR:
    NK(L->all_reduce(send, recv, n, t, op, comm, R->s), L->name);
    break;
  case C_AG:
    NK(L->all_gather(send, recv, n, t, comm, R->s), L->name);
    break;
  case C_RS:
    NK(L->reduce_scatter(send, recv, n, t, op, comm, R->s), L->name);
    break;
  case C_BC:
    NK(L->broadcast(send, recv, n, t, c->root, comm, R->s), L->name);
    break;
  default:
    NK(L->reduce(send, recv, n, t, op, c->root, comm, R->s), L->name);
    break;
  }
  return 0;
}

static int prepare(const tcase_t *c, rank_t *R, unsigned seed) {
  char *send, *recv, *fill, *cmp;
  size_t fill_n, cmp_n;
  case_buffers(c, R, &send, &recv, &fill, &fill_n, &cmp, &cmp_n);
  size_t es = dtype_bytes(c->dtype);
  size_t out_bytes = (c->coll == C_AG || c->coll == C_RS ? case_count(c) * NR : case_count(c)) * es;
  CK(cudaSetDevice(R->dev));
  CK(cudaMemsetAsync(R->out, 0xee, out_bytes, R->s));
  fill_kernel<<<256, 256, 0, R->s>>>(fill, fill_n, c->dtype, seed, R->rank);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

/* Runs every case on `nlocal` ranks driven by this thread (groups when more than one). */
static int run_cases(rank_t *Rs, int nlocal, const tcase_t *cs, int ncases, long *failures) {
  const lib_t *libs[2] = {&pcl_lib, &real_lib};
  for (int ci = 0; ci < ncases; ci++) {
    const tcase_t *c = &cs[ci];
    for (int which = 0; which < 2; which++) {
      const lib_t *L = libs[which];
      for (int k = 0; k < nlocal; k++)
        if (prepare(c, &Rs[k], (unsigned)ci))
          return 1;
      if (nlocal > 1)
        NK(L->group_start(), L->name);
      for (int k = 0; k < nlocal; k++) {
        CK(cudaSetDevice(Rs[k].dev));
        if (issue(L, c, &Rs[k], which))
          return 1;
      }
      if (nlocal > 1)
        NK(L->group_end(), L->name);
      if (which == 0)
        for (int k = 0; k < nlocal; k++) {
          char *send, *recv, *fill, *cmp;
          size_t fill_n, cmp_n;
          case_buffers(c, &Rs[k], &send, &recv, &fill, &fill_n, &cmp, &cmp_n);
          CK(cudaSetDevice(Rs[k].dev));
          if (cmp_n)
            CK(cudaMemcpyAsync(Rs[k].mine, cmp, cmp_n * dtype_bytes(c->dtype),
                               cudaMemcpyDeviceToDevice, Rs[k].s));
        }
    }
    for (int k = 0; k < nlocal; k++) {
      rank_t *R = &Rs[k];
      char *send, *recv, *fill, *cmp;
      size_t fill_n, cmp_n;
      case_buffers(c, R, &send, &recv, &fill, &fill_n, &cmp, &cmp_n);
      CK(cudaSetDevice(R->dev));
      R->bad[0] = 0;
      R->bad[1] = ~0ull;
      if (cmp_n)
        compare_kernel<<<256, 256, 0, R->s>>>(R->mine, cmp, cmp_n, c->dtype, R->d_bad,
                                              R->d_bad + 1);
      CK(cudaStreamSynchronize(R->s));
      if (R->bad[0] != 0) {
        if (*failures < 20)
          fprintf(stderr,
                  "MISMATCH rank %d: %s %s dtype %d (%s) %zu bytes %s root %d: %llu of %zu "
                  "elements differ (first %llu)\n",
                  R->rank, coll_names[c->coll], op_names[c->op], c->dtype,
                  is_float(c->dtype) ? "float" : "integer", c->bytes,
                  c->inplace ? "in-place" : "out-of-place", c->root, R->bad[0], cmp_n, R->bad[1]);
        (*failures)++;
      }
    }
  }
  return 0;
}

/* Destroys planccl's comms with stderr captured, echoes the PLANCCL_STATS table and returns the
 * number of calls that ran on plans ("N of M calls ran on plans"). */
static long destroy_with_stats(rank_t *Rs, int nlocal) {
  char path[] = "/tmp/pcl_coll_stats_XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(2);
  fflush(stderr);
  if (fd >= 0)
    dup2(fd, 2);
  for (int k = 0; k < nlocal; k++)
    pcl_lib.destroy(Rs[k].comm[0]);
  fflush(stderr);
  if (saved >= 0)
    dup2(saved, 2);
  long planned = 0;
  FILE *f = fd >= 0 ? fopen(path, "r") : NULL;
  char line[1024];
  while (f && fgets(line, sizeof(line), f)) {
    fputs(line, stderr);
    long x, y;
    const char *p = strstr(line, "rank ");
    if (p && strstr(line, "calls ran on plans") &&
        sscanf(strchr(p, ':') + 1, "%ld of %ld", &x, &y) == 2)
      planned += x;
  }
  if (f)
    fclose(f);
  if (fd >= 0)
    close(fd);
  unlink(path);
  if (saved >= 0)
    close(saved);
  return planned;
}

static int expect_plans(void) {
  int ok = 0;
  if (getenv("PLANCCL_DISABLE") && strcmp(getenv("PLANCCL_DISABLE"), "0") != 0)
    return 0;
  cudaDeviceCanAccessPeer(&ok, 0, 1);
  return ok;
}

static int finish(const char *model, long failures, long planned, int ncases, double secs) {
  printf("== coll_vs_nccl %s: %d cases, %ld mismatching, %ld calls ran on planccl plans "
         "(%.1f s)\n",
         model, ncases, failures, planned, secs);
  if (failures)
    return 1;
  if (planned == 0 && expect_plans()) {
    printf("== coll_vs_nccl %s: no call ran on a plan although the GPUs have peer access\n", model);
    return 1;
  }
  return 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Model 1: one process, one thread, both GPUs (ncclCommInitAll + groups). */
static int model_all(const tcase_t *cs, int ncases) {
  rank_t Rs[NR];
  int devs[NR];
  ncclComm_t pc[NR], rc[NR];
  double t0 = now_s();
  memset(Rs, 0, sizeof(Rs));
  for (int r = 0; r < NR; r++) {
    devs[r] = r;
    Rs[r].rank = Rs[r].dev = r;
    if (rank_alloc(&Rs[r]))
      return 1;
  }
  NK(pcl_lib.init_all(pc, NR, devs), "planccl");
  NK(real_lib.init_all(rc, NR, devs), "nccl");
  for (int r = 0; r < NR; r++) {
    Rs[r].comm[0] = pc[r];
    Rs[r].comm[1] = rc[r];
  }
  long failures = 0;
  int rc_run = run_cases(Rs, NR, cs, ncases, &failures);
  long planned = destroy_with_stats(Rs, NR);
  for (int r = 0; r < NR; r++) {
    real_lib.destroy(rc[r]);
    rank_free(&Rs[r]);
  }
  return rc_run ? 1
                : finish("one process, ncclCommInitAll + groups", failures, planned, ncases,
                         now_s() - t0);
}

/* Children of the planccl comm (ncclCommSplit with one color, ncclCommShrink excluding nobody)
 * are full planccl comms: the small allreduce cases run on them (against the real NCCL parent,
 * which has the same ranks) and some must run on plans. NCCL may refuse a shrink that excludes
 * nobody; that is reported, not failed. */
static int child_checks(rank_t *R, const tcase_t *cs, int ncases, long *failures) {
  tcase_t *sub = (tcase_t *)calloc((size_t)ncases, sizeof(*sub));
  int n = 0;
  for (int i = 0; sub != NULL && i < ncases; i++)
    if (cs[i].coll == C_AR && cs[i].bytes >= 1024 && cs[i].bytes <= 65536 &&
        (cs[i].dtype == ncclInt32 || cs[i].dtype == ncclFloat32 || cs[i].dtype == ncclBfloat16))
      sub[n++] = cs[i];
  if (sub == NULL)
    return 1;
  ncclComm_t parent = R->comm[0];
  for (int kind = 0; kind < 2; kind++) {
    ncclComm_t child = NULL;
    ncclResult_t r = kind == 0 ? ncclCommSplit(parent, 0, R->rank, &child, NULL)
                               : ncclCommShrink(parent, NULL, 0, &child, NULL, NCCL_SHRINK_DEFAULT);
    const char *what = kind == 0 ? "split" : "shrink";
    if (r != ncclSuccess || child == NULL) {
      if (kind == 0) {
        fprintf(stderr, "rank %d: ncclCommSplit failed: %d %s\n", R->rank, (int)r,
                ncclGetLastError(NULL));
        free(sub);
        return 1;
      }
      printf("== coll_vs_nccl rank %d: %s child not tested (ncclCommShrink excluding nobody "
             "returned %d)\n",
             R->rank, what, (int)r);
      continue;
    }
    long before = *failures;
    R->comm[0] = child;
    int rc = run_cases(R, 1, sub, n, failures);
    long planned = destroy_with_stats(R, 1);
    R->comm[0] = parent;
    printf("== coll_vs_nccl rank %d: %s child: %d allreduce cases, %ld mismatching, %ld calls ran "
           "on plans\n",
           R->rank, what, n, *failures - before, planned);
    if (rc || (planned == 0 && expect_plans())) {
      free(sub);
      return 1;
    }
  }
  free(sub);
  return 0;
}

/* Model 2: one process per GPU (forked before any CUDA call); rank 0 makes both ids. */
struct shared_ids {
  volatile int ready;
  ncclUniqueId pid, rid;
};

static int proc_rank(int rank, struct shared_ids *sh, const tcase_t *cs, int ncases) {
  rank_t R;
  memset(&R, 0, sizeof(R));
  R.rank = R.dev = rank;
  double t0 = now_s();
  CK(cudaSetDevice(rank));
  if (rank == 0) {
    NK(pcl_lib.get_id(&sh->pid), "planccl");
    NK(real_lib.get_id(&sh->rid), "nccl");
    __sync_synchronize();
    sh->ready = 1;
  } else {
    for (int i = 0; !sh->ready; i++) {
      if (i > 60000) {
        fprintf(stderr, "rank 1: no ids after 60 s\n");
        return 1;
      }
      usleep(1000);
    }
    __sync_synchronize();
  }
  if (rank_alloc(&R))
    return 1;
  NK(pcl_lib.init_rank(&R.comm[0], NR, sh->pid, rank), "planccl");
  NK(real_lib.init_rank(&R.comm[1], NR, sh->rid, rank), "nccl");
  long failures = 0;
  int rc_run = run_cases(&R, 1, cs, ncases, &failures);
  if (rc_run == 0)
    rc_run = child_checks(&R, cs, ncases, &failures);
  long planned = destroy_with_stats(&R, 1);
  real_lib.destroy(R.comm[1]);
  rank_free(&R);
  if (rc_run)
    return 1;
  char model[64];
  snprintf(model, sizeof(model), "one process per GPU, rank %d", rank);
  return finish(model, failures, planned, ncases, now_s() - t0);
}

static int model_proc(const tcase_t *cs, int ncases) {
  struct shared_ids *sh = (struct shared_ids *)mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                                                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    return 1;
  memset(sh, 0, sizeof(*sh));
  fflush(stdout);
  pid_t pids[NR];
  for (int r = 0; r < NR; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      int rc = proc_rank(r, sh, cs, ncases);
      fflush(stdout); /* _exit skips stdio: the verdict line must reach the log */
      _exit(rc);
    }
  }
  int rc = 0;
  for (int r = 0; r < NR; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      rc = 1;
  }
  munmap(sh, sizeof(*sh));
  return rc;
}

int main(int argc, char **argv) {
  const char *only = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
  }
  /* Before any planccl call: the stats table at destroy, and kernels that give up instead of
   * hanging the test if something is wrong. */
  setenv("PLANCCL_STATS", "1", 0);
  setenv("PLANCCL_TIMEOUT_S", "60", 0);
  /* Count GPUs in a child, so this process stays CUDA-free until the process model forked. */
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n >= NR ? 0 : SKIP);
  }
  int st = 0;
  waitpid(probe, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("coll_vs_nccl: needs %d GPUs: skipped\n", NR);
    return SKIP;
  }
  if (load_real())
    return 1;
  int ncases = 0;
  tcase_t *cs = make_cases(quick, &ncases);
  int rc = 0;
  /* The process model runs first: its children must fork before this process touches CUDA. */
  if (only == NULL || !strcmp(only, "proc"))
    rc |= model_proc(cs, ncases);
  if (only == NULL || !strcmp(only, "all"))
    rc |= model_all(cs, ncases);
  free(cs);
  printf("== coll_vs_nccl: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
