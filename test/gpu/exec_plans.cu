/* SPDX-License-Identifier: MIT
 * The executor and kernels on two GPUs: every 2-rank plan of test/data/plans/{good,conformance}
 * and plans/ against the collective's definition computed with the simulator's arithmetic
 * (bitwise for integers, ulp tolerance for floats), every dtype and op, in- and out-of-place,
 * several sizes; CUDA graphs (100 captured calls replayed with new inputs); plans alternating by
 * size back to back; two communicators interleaved; and the LL allreduce latency under graphs.
 * Zero-copy and port-channel plans run on buffers registered per (plan, size, placement); port
 * channels go over the copy engine, or TCP with --port-kind tcp (--port-only: only their plans).
 * Two ranks as two threads of one process, then as two forked processes. Exits 77 with fewer
 * than 2 GPUs. Usage: exec_plans [--only thread|proc] [--quick] [--port-kind ce|tcp] [--port-only]
 * [--filter a,b,..] (plans whose name contains one of the substrings) [--max-bytes N]
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "exec.h"
#include "memchan.h"
#include "portchan.h"
extern "C" {
#include "sim_int.h" /* the simulator's arithmetic: the reference results */
}

#define NR 2
#define MAX_PLANS 64
#define SCRATCH_BYTES (64ull << 20)
#define MAX_BYTES (4ull << 20)

typedef struct {
  int cases, pass, fail, skip;
  int graph_ok, alt_ok, two_ok;
  double lat_us;
  char first_fail[512];
} res_t;

typedef struct {
  int n;
  char path[MAX_PLANS][512];
} plan_list_t;

static res_t *g_res; /* [mode * NR + rank], MAP_SHARED for the forked ranks */
static plan_list_t g_pl;
static pcl_bootstrap_handle_t g_handle;
static int g_quick;
static int g_port_kind = PCL_TRANSPORT_CE;
static int g_port_only;
static uint64_t g_max_msg = UINT64_MAX; /* --max-bytes: largest message of the case sweep */
static const char *g_filter; /* comma-separated substrings of plan names; NULL = every plan */

static int name_selected(const char *name) {
  if (g_filter == NULL)
    return 1;
  const char *f = g_filter;
  while (*f) {
    size_t n = strcspn(f, ",");
    for (const char *h = name; n > 0 && *h; h++)
      if (strncmp(h, f, n) == 0)
        return 1;
    f += n + (f[n] == ',');
  }
  return 0;
}

#include "gpu_test_check.h"

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Deterministic input of `rank` for case `seed`: random bits for integers, small multiples of
 * 0.5 for floats (exact in every float type, so both sides see the same operands). */
static void gen_input(ncclDataType_t dt, uint64_t seed, int rank, uint8_t *buf, uint64_t bytes) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 7919 + 1;
  size_t es = pcl_sim_dtype_size(dt);
  if (!pcl_sim_dtype_is_float(dt)) {
    for (uint64_t i = 0; i < bytes; i++)
      buf[i] = (uint8_t)rng_next(&s);
    return;
  }
  for (uint64_t i = 0; i + es <= bytes; i += es)
    pcl_sim_store(dt, buf + i, ((double)(rng_next(&s) % 9) - 4.0) * 0.5 + 0.25);
}

static int plan_red_ok(const pcl_plan_t *p, ncclRedOp_t op) {
  return pcl_plan_accepts_op(p, (int)op);
}

/* Compares got with want; floats within 2 ulp of the expected value. */
static int compare(ncclDataType_t dt, const uint8_t *got, const uint8_t *want, uint64_t bytes,
                   uint64_t *bad) {
  if (!pcl_sim_dtype_is_float(dt)) {
    for (uint64_t i = 0; i < bytes; i++)
      if (got[i] != want[i]) {
        *bad = i;
        return 0;
      }
    return 1;
  }
  size_t es = pcl_sim_dtype_size(dt);
  for (uint64_t i = 0; i + es <= bytes; i += es) {
    double g = pcl_sim_load(dt, got + i), w = pcl_sim_load(dt, want + i);
    if (g == w || (isnan(g) && isnan(w)))
      continue;
    if (fabs(g - w) <= 2 * pcl_sim_ulp(dt, w))
      continue;
    *bad = i;
    return 0;
  }
  return 1;
}

typedef struct {
  int rank;
  pcl_bootstrap_t *boot;
  pcl_mem_alloc_t *scratch[2];
  pcl_memchan_t *mc[2];
  pcl_portchan_t *pc[2];
  pcl_exec_ctx_t *ctx[2];
  cudaStream_t st[2];
  uint8_t *d_in, *d_out; /* MAX_BYTES * NR each */
  uint8_t *h_in[NR], *h_out, *h_want;
} rank_t;

/* Buffer pointers and expected output for one case. */
typedef struct {
  const pcl_plan_t *plan;
  uint64_t msg, in_bytes, out_bytes;
  ncclDataType_t dt;
  ncclRedOp_t op;
  int inplace;
  const pcl_exec_userbuf_t *ub; /* registered buffers for zero-copy / port plans, else NULL */
} case_t;

static void bufs_of(rank_t *R, const case_t *c, uint8_t *din, uint8_t *dout, uint8_t **in,
                    uint8_t **out) {
  *out = dout;
  *in = din;
  if (!c->inplace)
    return;
  if (c->plan->collective == PCL_PLAN_COLL_ALLGATHER)
    *in = dout + (uint64_t)R->rank * c->in_bytes;
  else if (c->plan->collective == PCL_PLAN_COLL_REDUCESCATTER)
    *out = dout + (uint64_t)R->rank * c->out_bytes, *in = dout;
  else
    *in = dout;
}

static void expected(rank_t *R, const case_t *c, uint64_t seed) {
  for (int r = 0; r < NR; r++)
    gen_input(c->dt, seed, r, R->h_in[r], c->in_bytes);
  size_t es = pcl_sim_dtype_size(c->dt);
  switch (c->plan->collective) {
  case PCL_PLAN_COLL_ALLGATHER:
    for (int r = 0; r < NR; r++)
      memcpy(R->h_want + r * c->in_bytes, R->h_in[r], c->in_bytes);
    break;
  default: { /* allreduce, reducescatter */
    uint8_t *acc = R->h_want;
    uint64_t off =
        c->plan->collective == PCL_PLAN_COLL_REDUCESCATTER ? (uint64_t)R->rank * c->out_bytes : 0;
    memcpy(acc, R->h_in[0] + off, c->out_bytes);
    for (int r = 1; r < NR; r++)
      pcl_sim_reduce(c->dt, c->op, acc, R->h_in[r] + off, c->out_bytes / es);
    if (c->op == ncclAvg)
      pcl_sim_avg_scale(c->dt, acc, c->out_bytes / es, NR);
  }
  }
}

static int launch_case(rank_t *R, int comm, const case_t *c, uint8_t *din, uint8_t *dout,
                       uint64_t seed) {
  int rank = R->rank;
  uint8_t *in, *out;
  bufs_of(R, c, din, dout, &in, &out);
  gen_input(c->dt, seed, rank, R->h_in[rank], c->in_bytes);
  CUCK(cudaMemsetAsync(dout, 0xa5, c->out_bytes * (c->inplace ? NR : 1), R->st[comm]));
  CUCK(cudaMemcpyAsync(in, R->h_in[rank], c->in_bytes, cudaMemcpyHostToDevice, R->st[comm]));
  pcl_exec_args_t a = {in, out, c->in_bytes, c->out_bytes, c->dt, c->op, 0, 0, c->ub};
  CK(pcl_exec_launch(R->ctx[comm], c->plan, &a, R->st[comm]));
  return 0;
}

static int check_case(rank_t *R, int comm, const case_t *c, uint8_t *din, uint8_t *dout,
                      uint64_t seed, res_t *res) {
  int rank = R->rank;
  uint8_t *in, *out;
  bufs_of(R, c, din, dout, &in, &out);
  CUCK(cudaMemcpyAsync(R->h_out, out, c->out_bytes, cudaMemcpyDeviceToHost, R->st[comm]));
  CUCK(cudaStreamSynchronize(R->st[comm]));
  expected(R, c, seed);
  uint64_t bad = 0;
  res->cases++;
  if (compare(c->dt, R->h_out, R->h_want, c->out_bytes, &bad)) {
    res->pass++;
    return 0;
  }
  res->fail++;
  if (!res->first_fail[0])
    snprintf(res->first_fail, sizeof(res->first_fail), "%s %s %s %llu bytes %s: byte %llu differs",
             c->plan->path, pcl_sim_dtype_name(c->dt), pcl_sim_op_name(c->op),
             (unsigned long long)c->msg, c->inplace ? "in-place" : "out-of-place",
             (unsigned long long)bad);
  return 0;
}

static int run_cases(rank_t *R, pcl_plan_t **plans, int np, res_t *res) {
  int rank = R->rank;
  static const uint64_t sizes[] = {1024, 3 * 1024 + 256, 65536, 1 << 20};
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  uint64_t seed = 1;
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pl = plans[p];
    int pass0 = res->pass, fail0 = res->fail, skip0 = res->skip;
    int reducing = pl->collective != PCL_PLAN_COLL_ALLGATHER;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
      case_t c;
      memset(&c, 0, sizeof(c));
      c.plan = pl;
      c.msg = sizes[si];
      if (c.msg > g_max_msg || !pcl_plan_size_runnable(pl, c.msg) ||
          pcl_plan_buffer_bytes(pl, c.msg, &c.in_bytes, &c.out_bytes) != 0 ||
          c.in_bytes > MAX_BYTES || c.out_bytes > MAX_BYTES)
        continue;
      for (int ip = 0; ip < 2; ip++) {
        c.inplace = ip ? 1 : 0;
        if (c.inplace != pl->inplace && !(pl->inplace && pl->outofplace_ok && !c.inplace))
          continue;
        /* Plans that reach user buffers through peers or the proxy get this placement's exact
         * buffers registered (collectively: the decision is the same on both ranks). */
        pcl_exec_userbuf_t *ub = NULL;
        pcl_exec_shape_t shape;
        c.ub = NULL;
        if (pcl_exec_shape(pl, rank, c.in_bytes, c.out_bytes, &shape) == ncclSuccess &&
            (shape.remote_io || shape.port_io)) {
          uint8_t *in, *out;
          bufs_of(R, &c, R->d_in, R->d_out, &in, &out);
          CK(pcl_exec_userbuf_create(R->ctx[0], in, c.in_bytes, out, c.out_bytes, &ub));
          c.ub = ub;
        }
        for (int dt = 0; dt < ncclNumTypes; dt++) {
          if (g_quick && dt != ncclFloat32 && dt != ncclInt32 && dt != ncclBfloat16)
            continue;
          for (int o = 0; o < (reducing ? 5 : 1); o++) {
            c.dt = (ncclDataType_t)dt;
            c.op = ops[o];
            seed++;
            uint8_t *ain, *aout;
            bufs_of(R, &c, R->d_in, R->d_out, &ain, &aout);
            pcl_exec_args_t a = {ain, aout, c.in_bytes, c.out_bytes, c.dt, c.op, 0, 0, c.ub};
            if (!plan_red_ok(pl, c.op) || !pcl_exec_supported(R->ctx[0], pl, &a)) {
              res->skip++;
              continue;
            }
            if (launch_case(R, 0, &c, R->d_in, R->d_out, seed))
              return 1;
            if (check_case(R, 0, &c, R->d_in, R->d_out, seed, res))
              return 1;
            /* Nobody overwrites an input a peer may still read. */
            CK(pcl_bootstrap_barrier(R->boot));
          }
        }
        pcl_exec_userbuf_destroy(ub);
      }
    }
    /* A plan none of whose cases could run is a failure: every plan here must be runnable
     * (zero-copy and port-channel ones included), so an executor that refused it is broken. */
    if (res->skip > skip0 && res->pass == pass0 && res->fail == fail0) {
      res->fail++;
      if (!res->first_fail[0])
        snprintf(res->first_fail, sizeof(res->first_fail), "%s: all %d cases refused by the "
                 "executor", pl->path, res->skip - skip0);
    }
    if (rank == 0)
      printf("  plan %-28s pass %4d fail %4d skip %4d\n", pl->name, res->pass - pass0,
             res->fail - fail0, res->skip - skip0);
  }
  return 0;
}

/* The first runnable in-place LL allreduce plan at `msg` bytes. */
static const pcl_plan_t *find_ll_ar(rank_t *R, pcl_plan_t **plans, int np, uint64_t msg) {
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pl = plans[p];
    uint64_t in, out;
    if (pl->collective != PCL_PLAN_COLL_ALLREDUCE || pl->protocol != PCL_PLAN_PROTO_LL ||
        !pl->inplace || !pcl_plan_size_runnable(pl, msg) ||
        pcl_plan_buffer_bytes(pl, msg, &in, &out))
      continue;
    pcl_exec_args_t a = {R->d_out, R->d_out, in, out, ncclInt32, ncclMax, 0, 0, NULL};
    if (pcl_exec_supported(R->ctx[0], pl, &a))
      return pl;
  }
  return NULL;
}

/* Kernel time per call of `pk` under a CUDA graph of 100 calls, replayed 20 times. */
static int graph_latency(rank_t *R, const pcl_plan_t *pk, pcl_exec_args_t *b, double *us) {
  int rank = R->rank;
  cudaGraph_t g2;
  cudaGraphExec_t ge2;
  cudaEvent_t e0, e1;
  CK(pcl_exec_prepare(R->ctx[0], pk, b));
  CUCK(cudaMemsetAsync(R->d_out, 0, b->in_bytes, R->st[0]));
  CUCK(cudaStreamBeginCapture(R->st[0], cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 100; i++)
    CK(pcl_exec_launch(R->ctx[0], pk, b, R->st[0]));
  CUCK(cudaStreamEndCapture(R->st[0], &g2));
  CUCK(cudaGraphInstantiate(&ge2, g2, 0));
  CUCK(cudaEventCreate(&e0));
  CUCK(cudaEventCreate(&e1));
  CUCK(cudaGraphLaunch(ge2, R->st[0])); /* warm-up */
  CUCK(cudaStreamSynchronize(R->st[0]));
  CK(pcl_bootstrap_barrier(R->boot));
  CUCK(cudaEventRecord(e0, R->st[0]));
  for (int i = 0; i < 20; i++)
    CUCK(cudaGraphLaunch(ge2, R->st[0]));
  CUCK(cudaEventRecord(e1, R->st[0]));
  CUCK(cudaEventSynchronize(e1));
  float ms = 0;
  CUCK(cudaEventElapsedTime(&ms, e0, e1));
  *us = ms * 1000.0 / 2000.0;
  cudaGraphExecDestroy(ge2);
  cudaGraphDestroy(g2);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  CK(pcl_bootstrap_barrier(R->boot));
  return 0;
}

/* 100 in-place max-allreduce calls captured once, replayed 50 times with new inputs: max is
 * idempotent, so every replay must end with max(in0, in1); the flags advance 100 per replay. */
static int run_graph(rank_t *R, pcl_plan_t **plans, int np, res_t *res) {
  int rank = R->rank;
  const uint64_t msg = 16384;
  const pcl_plan_t *pl = find_ll_ar(R, plans, np, msg);
  if (pl == NULL)
    return 0;
  case_t c = {pl, msg, msg, msg, ncclInt32, ncclMax, 1};
  pcl_exec_args_t a = {R->d_out, R->d_out, msg, msg, ncclInt32, ncclMax, 0, 0, NULL};
  CK(pcl_exec_prepare(R->ctx[0], pl, &a));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  /* Thread-local capture: the other rank may be a thread of this process capturing too. */
  CUCK(cudaStreamBeginCapture(R->st[0], cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 100; i++)
    CK(pcl_exec_launch(R->ctx[0], pl, &a, R->st[0]));
  CUCK(cudaStreamEndCapture(R->st[0], &g));
  CUCK(cudaGraphInstantiate(&ge, g, 0));
  int ok = 1;
  for (int rep = 0; rep < 50; rep++) {
    uint64_t seed = 100000 + rep;
    gen_input(c.dt, seed, rank, R->h_in[rank], msg);
    CUCK(cudaMemcpyAsync(R->d_out, R->h_in[rank], msg, cudaMemcpyHostToDevice, R->st[0]));
    CUCK(cudaStreamSynchronize(R->st[0]));
    CK(pcl_bootstrap_barrier(R->boot)); /* both inputs are in place before either replays */
    CUCK(cudaGraphLaunch(ge, R->st[0]));
    CUCK(cudaMemcpyAsync(R->h_out, R->d_out, msg, cudaMemcpyDeviceToHost, R->st[0]));
    CUCK(cudaStreamSynchronize(R->st[0]));
    expected(R, &c, seed);
    uint64_t bad;
    if (!compare(c.dt, R->h_out, R->h_want, msg, &bad))
      ok = 0;
    CK(pcl_bootstrap_barrier(R->boot));
  }
  res->graph_ok = ok ? 1 : -1;
  /* Latency: fp32 sum, 100 calls per graph, kernel time only, every in-place LL allreduce
   * plan at a few sizes (1 KB is the headline number). */
  static const uint64_t lat_sizes[] = {1024, 16384, 262144, 1 << 20};
  for (int p = 0; p < np; p++) {
    const pcl_plan_t *pk = plans[p];
    if (pk->collective != PCL_PLAN_COLL_ALLREDUCE || pk->protocol != PCL_PLAN_PROTO_LL ||
        !pk->inplace || !plan_red_ok(pk, ncclSum))
      continue;
    for (size_t si = 0; si < sizeof(lat_sizes) / sizeof(lat_sizes[0]); si++) {
      uint64_t sz = lat_sizes[si];
      if (!pcl_plan_size_runnable(pk, sz))
        continue;
      pcl_exec_args_t b = {R->d_out, R->d_out, sz, sz, ncclFloat32, ncclSum, 0, 0, NULL};
      if (!pcl_exec_supported(R->ctx[0], pk, &b))
        continue;
      double us;
      if (graph_latency(R, pk, &b, &us))
        return 1;
      if (sz == 1024 && (res->lat_us == 0 || us < res->lat_us))
        res->lat_us = us;
      if (rank == 0)
        printf("  latency %-28s %8llu B %8.2f us/call (CUDA graph, kernel time)\n", pk->name,
               (unsigned long long)sz, us);
    }
  }
  /* The interpreter's fixed cost: plans whose blocks only run one nop, 1x32 and 8x512. */
  static const char *const nop_shapes[][2] = {{"1", "32"}, {"8", "512"}};
  for (int k = 0; k < 2; k++) {
    char json[8192], tbs[2048] = "", err[512];
    int nb = atoi(nop_shapes[k][0]);
    for (int b = 0; b < nb; b++)
      snprintf(tbs + strlen(tbs), sizeof(tbs) - strlen(tbs),
               "%s{\"id\":%d,\"channels\":[],\"remote_buffer_refs\":[],\"ops\":[{\"name\":\"nop\"}]}",
               b ? "," : "", b);
    char gpu[2][2400];
    for (int r = 0; r < NR; r++)
      snprintf(gpu[r], sizeof(gpu[r]),
               "{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
               "\"channels\":[],\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[%s]}",
               r, tbs);
    snprintf(json, sizeof(json),
             "{\"name\":\"nop_%sx%s\",\"collective\":\"allreduce\",\"protocol\":\"Simple\","
             "\"inplace\":true,\"num_threads_per_block\":%s,\"gpus\":[%s,%s]}",
             nop_shapes[k][0], nop_shapes[k][1], nop_shapes[k][1], gpu[0], gpu[1]);
    pcl_plan_t *np_plan = NULL;
    if (pcl_plan_load_buffer("nop.json", json, strlen(json), &np_plan, err, sizeof(err)) !=
        ncclSuccess)
      FAIL("nop plan: %s", err);
    pcl_exec_args_t b = {R->d_out, R->d_out, 1024, 1024, ncclFloat32, ncclSum, 0, 0, NULL};
    double us = 0;
    int bad = !pcl_exec_supported(R->ctx[0], np_plan, &b) || graph_latency(R, np_plan, &b, &us);
    if (rank == 0)
      printf("  latency %-28s %8d B %8.2f us/call (CUDA graph, kernel time)%s\n", np_plan->name,
             1024, us, bad ? " FAILED" : "");
    pcl_plan_destroy(np_plan);
    if (bad)
      return 1;
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  uint32_t kerr;
  if (pcl_exec_async_error(R->ctx[0], &kerr) != ncclSuccess)
    FAIL("kernel error %u", kerr);
  return 0;
}

/* Back-to-back calls without host synchronisation: allreduce plans alternate by size (each call
 * on its own buffers), then the same interleaved over two communicators on two streams. */
static int run_alternating(rank_t *R, pcl_plan_t **plans, int np, res_t *res) {
  int rank = R->rank;
  enum { K = 8 };
  static const uint64_t sizes[] = {1024, 8192, 65536, 4096, 262144, 2048, 16384, 131072};
  case_t c[K];
  int n = 0;
  for (int i = 0; i < K; i++) {
    for (int p = 0; p < np; p++) {
      const pcl_plan_t *pl = plans[(p + i) % np];
      uint64_t in, out;
      if (pl->collective != PCL_PLAN_COLL_ALLREDUCE || !pcl_plan_size_runnable(pl, sizes[i]) ||
          pcl_plan_buffer_bytes(pl, sizes[i], &in, &out) || in * NR > MAX_BYTES)
        continue;
      pcl_exec_args_t a = {R->d_in, R->d_out, in, out, ncclFloat32, ncclSum, 0, 0, NULL};
      if (!plan_red_ok(pl, ncclSum) || !pcl_exec_supported(R->ctx[0], pl, &a) ||
          !pcl_exec_supported(R->ctx[1], pl, &a))
        continue;
      c[n] = (case_t){pl, sizes[i], in, out, ncclFloat32, ncclSum, pl->inplace};
      n++;
      break;
    }
  }
  if (n == 0)
    return 0;
  for (int comm_mode = 0; comm_mode < 2; comm_mode++) {
    for (int i = 0; i < n; i++) {
      int comm = comm_mode ? i & 1 : 0;
      uint8_t *din = R->d_in + (uint64_t)i * (MAX_BYTES / K),
              *dout = R->d_out + (uint64_t)i * (MAX_BYTES / K);
      if (launch_case(R, comm, &c[i], din, dout, 5000 + i))
        return 1;
    }
    res_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    for (int i = 0; i < n; i++) {
      int comm = comm_mode ? i & 1 : 0;
      uint8_t *din = R->d_in + (uint64_t)i * (MAX_BYTES / K),
              *dout = R->d_out + (uint64_t)i * (MAX_BYTES / K);
      if (check_case(R, comm, &c[i], din, dout, 5000 + i, &tmp))
        return 1;
    }
    if (comm_mode == 0)
      res->alt_ok = tmp.fail ? -1 : 1;
    else
      res->two_ok = tmp.fail ? -1 : 1;
    if (tmp.fail && !res->first_fail[0])
      memcpy(res->first_fail, tmp.first_fail, sizeof(tmp.first_fail));
    CK(pcl_bootstrap_barrier(R->boot));
  }
  return 0;
}

static int rank_main(int rank, res_t *res) {
  rank_t R;
  memset(&R, 0, sizeof(R));
  R.rank = rank;
  CUCK(cudaSetDevice(rank));
  CK(pcl_bootstrap_create(&g_handle, rank, NR, NULL, &R.boot));
  for (int k = 0; k < 2; k++) {
    CK(pcl_mem_alloc(rank, SCRATCH_BYTES, PCL_MEM_ALLOC_AUTO, &R.scratch[k]));
    pcl_memchan_config_t mcfg;
    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.cuda_dev = rank;
    mcfg.nchannels = 16;
    mcfg.scratch = R.scratch[k]->ptr;
    mcfg.scratch_bytes = SCRATCH_BYTES;
    CK(pcl_memchan_create(R.boot, &mcfg, &R.mc[k]));
    uint8_t kinds[NR];
    for (int r = 0; r < NR; r++)
      kinds[r] = r == rank ? PCL_TRANSPORT_NONE : (uint8_t)g_port_kind;
    pcl_portchan_config_t pcfg;
    memset(&pcfg, 0, sizeof(pcfg));
    pcfg.cuda_dev = rank;
    pcfg.nchannels = 4;
    pcfg.kind = kinds;
    pcfg.memchan = R.mc[k];
    pcfg.scratch = R.scratch[k]->ptr;
    pcfg.scratch_bytes = SCRATCH_BYTES;
    CK(pcl_portchan_create(R.boot, &pcfg, &R.pc[k]));
    pcl_exec_config_t ecfg;
    memset(&ecfg, 0, sizeof(ecfg));
    ecfg.cuda_dev = rank;
    ecfg.rank = rank;
    ecfg.nranks = NR;
    ecfg.memchan = R.mc[k];
    ecfg.portchan = R.pc[k];
    ecfg.scratch = R.scratch[k]->ptr;
    ecfg.scratch_bytes = SCRATCH_BYTES;
    ecfg.timeout_s = 10;
    CK(pcl_exec_ctx_create(&ecfg, &R.ctx[k]));
    CUCK(cudaStreamCreateWithFlags(&R.st[k], cudaStreamNonBlocking));
  }
  CUCK(cudaMalloc((void **)&R.d_in, MAX_BYTES * NR));
  CUCK(cudaMalloc((void **)&R.d_out, MAX_BYTES * NR));
  for (int r = 0; r < NR; r++)
    R.h_in[r] = (uint8_t *)malloc(MAX_BYTES * NR);
  R.h_out = (uint8_t *)malloc(MAX_BYTES * NR);
  R.h_want = (uint8_t *)malloc(MAX_BYTES * NR);
  pcl_plan_t *plans[MAX_PLANS];
  int np = 0;
  for (int i = 0; i < g_pl.n; i++) {
    char err[512];
    pcl_plan_t *p = NULL;
    if (pcl_plan_load(g_pl.path[i], &p, err, sizeof(err)) != ncclSuccess)
      continue;
    if (p->n_gpus != NR || (g_port_only && p->gpus[rank].n_channels[PCL_PLAN_CHAN_PORT] == 0) ||
        !name_selected(p->name)) {
      pcl_plan_destroy(p);
      continue;
    }
    plans[np++] = p;
  }
  int rc = run_cases(&R, plans, np, res);
  if (rc == 0)
    rc = run_graph(&R, plans, np, res);
  if (rc == 0)
    rc = run_alternating(&R, plans, np, res);
  uint32_t kerr = 0;
  if (pcl_exec_async_error(R.ctx[0], &kerr) != ncclSuccess ||
      pcl_exec_async_error(R.ctx[1], &kerr) != ncclSuccess) {
    fprintf(stderr, "rank %d: kernel error word %u\n", rank, kerr);
    rc = 1;
  }
  cudaDeviceSynchronize();
  for (int k = 0; k < 2; k++) {
    pcl_exec_ctx_destroy(R.ctx[k]);
    cudaStreamDestroy(R.st[k]);
  }
  pcl_bootstrap_barrier(R.boot);
  for (int k = 0; k < 2; k++) {
    pcl_portchan_destroy(R.pc[k]);
    pcl_memchan_destroy(R.mc[k]);
    pcl_mem_free(R.scratch[k]);
  }
  for (int i = 0; i < np; i++)
    pcl_plan_destroy(plans[i]);
  cudaFree(R.d_in);
  cudaFree(R.d_out);
  for (int r = 0; r < NR; r++)
    free(R.h_in[r]);
  free(R.h_out);
  free(R.h_want);
  pcl_bootstrap_destroy(R.boot);
  return rc;
}

typedef struct {
  int rank, mode, rc;
} targ_t;

static void *thread_main(void *p) {
  targ_t *t = (targ_t *)p;
  t->rc = rank_main(t->rank, &g_res[t->mode * NR + t->rank]);
  return NULL;
}

static void add_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char names[MAX_PLANS][256];
  int n = 0;
  while ((e = readdir(d)) != NULL && n < MAX_PLANS) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)
      snprintf(names[n++], 256, "%s", e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
  for (int i = 0; i < n && g_pl.n < MAX_PLANS; i++)
    if (snprintf(g_pl.path[g_pl.n], 512, "%s/%s", dir, names[i]) < 512) /* skip over-long paths */
      g_pl.n++;
}

static int gpu_count(void) {
  /* In a child, so the parent never initialises CUDA before forking the ranks. */
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
      n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--port-kind") && i + 1 < argc) {
      const char *k = argv[++i];
      if (strcmp(k, "ce") && strcmp(k, "tcp")) {
        fprintf(stderr, "exec_plans: --port-kind takes ce or tcp, not '%s'\n", k);
        return 2;
      }
      g_port_kind = strcmp(k, "tcp") ? PCL_TRANSPORT_CE : PCL_TRANSPORT_TCP;
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
      g_max_msg = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      g_filter = argv[++i];
    else if (!strcmp(argv[i], "--port-only"))
      g_port_only = 1;
    else if (!strcmp(argv[i], "--quick"))
      g_quick = 1;
  }
  if (gpu_count() < NR) {
    printf("exec_plans: fewer than %d GPUs, skipped\n", NR);
    return 77;
  }
  const char *src = getenv("PCL_SOURCE_DIR");
  char dir[600];
  if (src == NULL)
    src = ".";
  snprintf(dir, sizeof(dir), "%s/test/data/plans/good", src);
  add_dir(dir);
  snprintf(dir, sizeof(dir), "%s/test/data/plans/conformance", src);
  add_dir(dir);
  snprintf(dir, sizeof(dir), "%s/plans/allreduce", src);
  add_dir(dir);
  snprintf(dir, sizeof(dir), "%s/plans/extra/allreduce", src);
  add_dir(dir);
  snprintf(dir, sizeof(dir), "%s/plans/extra/allgather", src);
  add_dir(dir);
  g_res = (res_t *)mmap(NULL, sizeof(res_t) * 2 * NR, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  memset(g_res, 0, sizeof(res_t) * 2 * NR);
  int failed = 0;
  /* Processes first: the parent must not have initialised CUDA when it forks the ranks. */
  for (int mode = 1; mode >= 0; mode--) { /* 0 = threads, 1 = processes */
    if (only && strcmp(only, mode ? "proc" : "thread"))
      continue;
    if (pcl_bootstrap_root_create(&g_handle) != ncclSuccess)
      return 1;
    if (mode == 0) {
      pthread_t th[NR];
      targ_t ta[NR];
      for (int r = 0; r < NR; r++) {
        ta[r] = (targ_t){r, mode, 0};
        pthread_create(&th[r], NULL, thread_main, &ta[r]);
      }
      for (int r = 0; r < NR; r++) {
        pthread_join(th[r], NULL);
        failed |= ta[r].rc != 0;
      }
    } else {
      pid_t pid[NR];
      for (int r = 0; r < NR; r++) {
        pid[r] = fork();
        if (pid[r] == 0)
          _exit(rank_main(r, &g_res[mode * NR + r]) ? 1 : 0);
      }
      for (int r = 0; r < NR; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
      }
    }
  }
  printf("\n%-8s %-5s %7s %7s %7s %7s %6s %6s %6s %10s\n", "mode", "rank", "cases", "pass", "fail",
         "skip", "graph", "alt", "2comm", "LL1KB_us");
  for (int mode = 0; mode < 2; mode++)
    for (int r = 0; r < NR; r++) {
      res_t *x = &g_res[mode * NR + r];
      const char *yn[3] = {"FAIL", "-", "ok"};
      printf("%-8s %-5d %7d %7d %7d %7d %6s %6s %6s %10.2f\n", mode ? "proc" : "thread", r,
             x->cases, x->pass, x->fail, x->skip, yn[x->graph_ok + 1], yn[x->alt_ok + 1],
             yn[x->two_ok + 1], x->lat_us);
      if (x->first_fail[0])
        printf("  first failure: %s\n", x->first_fail);
      failed |= x->fail > 0 || x->graph_ok < 0 || x->alt_ok < 0 || x->two_ok < 0;
    }
  printf("(LL allreduce latency: kernel time per call under CUDA graphs; BASELINE one-way flag "
         "latency 0.70 us)\n");
  return failed ? 1 : 0;
}
