/* SPDX-License-Identifier: MIT
 * One rank of an exec_plans group: its channels and executor contexts (on GPU rank % ngpus), and
 * the per-plan case sweep whose every output must equal the CPU simulator's bit for bit. */
#include <dirent.h>
#include <math.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "exec.h"
#include "exec_rank.h"
#include "transport.h"
extern "C" {
#include "alloc.h"
#include "sim.h"
#include "sim_int.h" /* dtype facts of the simulator */
}

#include "gpu_test_check.h"

/* ---- setup ---- */

int xr_setup(xr_t *R) {
  int rank = R->rank;
  xp_group_t *g = R->g;
  R->dev = rank % xp_opts.ngpus;
  CUCK(cudaSetDevice(R->dev));
  for (int k = 0; k < 2; k++) {
    CK(pcl_mem_alloc(R->dev, XR_SCRATCH_BYTES, PCL_MEM_ALLOC_AUTO, &R->scratch[k]));
    pcl_memchan_config_t mcfg;
    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.cuda_dev = R->dev;
    mcfg.nchannels = 16;
    mcfg.scratch = R->scratch[k]->ptr;
    mcfg.scratch_bytes = XR_SCRATCH_BYTES;
    CK(pcl_memchan_create(R->boot, &mcfg, &R->mc[k]));
    if (R->any_port) {
      /* Emulated hosts: the chosen kind inside a host, TCP between hosts. */
      uint8_t kinds[XP_MAXR];
      for (int r = 0; r < g->nranks; r++)
        kinds[r] = r == rank                     ? (uint8_t)PCL_TRANSPORT_NONE
                   : r / g->rpn == rank / g->rpn ? (uint8_t)xp_opts.port_kind
                                                 : (uint8_t)PCL_TRANSPORT_TCP;
      pcl_portchan_config_t pcfg;
      memset(&pcfg, 0, sizeof(pcfg));
      pcfg.cuda_dev = R->dev;
      pcfg.nchannels = 4;
      pcfg.kind = kinds;
      pcfg.memchan = R->mc[k];
      pcfg.scratch = R->scratch[k]->ptr;
      pcfg.scratch_bytes = XR_SCRATCH_BYTES;
      CK(pcl_portchan_create(R->boot, &pcfg, &R->pc[k]));
    }
    pcl_exec_config_t ecfg =
        xr_exec_config(R, R->mc[k], R->scratch[k]->ptr,
                       getenv("PLANCCL_TIMEOUT_S") ? atoi(getenv("PLANCCL_TIMEOUT_S")) : 10);
    ecfg.portchan = R->pc[k];
    ecfg.first_flag = xp_opts.first_flag;
    CK(pcl_exec_ctx_create(&ecfg, &R->ctx[k]));
    if (R->st[k] == NULL)
      CUCK(cudaStreamCreateWithFlags(&R->st[k], cudaStreamNonBlocking));
  }
  return 0;
}

/* Local; the caller synchronised. Collective only through the barrier that follows it. */
void xr_teardown(xr_t *R) {
  cudaDeviceSynchronize();
  for (int k = 0; k < 2; k++) {
    pcl_exec_window_destroy(R->win[k]);
    R->win[k] = NULL;
  }
  for (int k = 0; k < 2; k++) {
    pcl_exec_ctx_destroy(R->ctx[k]);
    R->ctx[k] = NULL;
  }
  pcl_bootstrap_barrier(R->boot); /* no peer still runs a kernel on our memory */
  for (int k = 0; k < 2; k++) {
    pcl_portchan_destroy(R->pc[k]);
    pcl_memchan_destroy(R->mc[k]);
    pcl_mem_free(R->scratch[k]);
    R->pc[k] = NULL;
    R->mc[k] = NULL;
    R->scratch[k] = NULL;
  }
}

/* ---- the reference: the simulator's run of exactly this case ---- */

static void capture(void *arg, const pcl_sim_capture_t *cap) {
  xp_ref_t *x = (xp_ref_t *)arg;
  int rank = cap->rank;
  if (rank < 0 || rank >= XP_MAXR || cap->in_bytes > x->cap || cap->out_bytes > x->cap)
    return;
  memcpy(x->in[rank], cap->input, cap->in_bytes);
  memcpy(x->want[rank], cap->output, cap->out_bytes);
  x->in_bytes = cap->in_bytes;
  x->out_bytes = cap->out_bytes;
  x->seen[rank]++;
}

/* One segment of a segmented case: its inputs are the whole case's slice at off, its outputs
 * go to the same slice of the reference. */
typedef struct {
  xp_ref_t *x;
  uint64_t off;
  int seen[XP_MAXR];
} seg_ref_t;

static void seg_input(void *arg, int call, int rank, uint8_t *buf, uint64_t bytes) {
  (void)call;
  const seg_ref_t *s = (const seg_ref_t *)arg;
  if (rank >= 0 && rank < XP_MAXR && s->off + bytes <= s->x->cap)
    memcpy(buf, s->x->in[rank] + s->off, bytes);
}

static void seg_capture(void *arg, const pcl_sim_capture_t *cap) {
  seg_ref_t *s = (seg_ref_t *)arg;
  if (cap->rank < 0 || cap->rank >= XP_MAXR || s->off + cap->out_bytes > s->x->cap)
    return;
  memcpy(s->x->want[cap->rank] + s->off, cap->output, cap->out_bytes);
  s->seen[cap->rank]++;
}

/* Replaces the whole case's outputs by each segment's, simulated on the slices of its inputs. */
static void reference_segments(const pcl_plan_t *pl, const xr_case_t *c, pcl_sim_opts_t *o,
                               xp_ref_t *x) {
  pcl_sim_result_t *res = (pcl_sim_result_t *)calloc(1, sizeof(*res));
  seg_ref_t s;
  for (uint64_t k = 0; res != NULL && x->verdict == PCL_SIM_PASS && k < c->nseg; k++) {
    memset(&s, 0, sizeof(s));
    s.x = x;
    s.off = k * c->seg;
    uint64_t len = k + 1 == c->nseg ? c->msg - s.off : c->seg;
    o->sizes = &len;
    o->input = seg_input;
    o->input_arg = &s;
    o->capture = seg_capture;
    o->capture_arg = &s;
    if (pcl_sim_run(pl, o, res) != ncclSuccess || res->verdict != PCL_SIM_PASS) {
      x->verdict = res->verdict == PCL_SIM_PASS ? PCL_SIM_ERROR : res->verdict;
      char what[48];
      snprintf(what, sizeof(what), "segment %llu: ", (unsigned long long)k);
      xp_copy(x->msg, sizeof(x->msg), what);
      xp_copy(x->msg + strlen(x->msg), sizeof(x->msg) - strlen(x->msg), res->message);
    }
    for (int r = 0; x->verdict == PCL_SIM_PASS && r < pl->n_gpus; r++)
      if (s.seen[r] != 1) {
        x->verdict = PCL_SIM_ERROR;
        snprintf(x->msg, sizeof(x->msg), "segment %llu: the simulator reported rank %d %d times",
                 (unsigned long long)k, r, s.seen[r]);
      }
  }
  if (res == NULL)
    x->verdict = PCL_SIM_ERROR;
  free(res);
}

void xr_reference(const pcl_plan_t *pl, const xr_case_t *c, uint64_t seed, xp_ref_t *x) {
  memset(x->seen, 0, sizeof(x->seen));
  x->msg[0] = '\0';
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  o.dtype = c->dt;
  o.op = c->op;
  o.sizes = &c->msg;
  o.nsizes = 1;
  o.seed = seed;
  o.nseeds = 1;
  o.packet = c->ll8 ? PCL_SIM_LL8 : PCL_SIM_LL16;
  o.calls_per_size = 1;
  o.rounding_inputs = 1; /* floats round: the GPU must reduce in the simulator's order */
  o.layout = c->inplace ? PCL_SIM_LAYOUT_INPLACE : PCL_SIM_LAYOUT_OUTOFPLACE;
  o.capture = capture;
  o.capture_arg = x;
  pcl_sim_result_t *res = (pcl_sim_result_t *)calloc(1, sizeof(*res));
  if (res == NULL || pcl_sim_run(pl, &o, res) != ncclSuccess) {
    x->verdict = PCL_SIM_ERROR;
    snprintf(x->msg, sizeof(x->msg), "the simulator could not run");
  } else {
    x->verdict = res->verdict;
    xp_copy(x->msg, sizeof(x->msg), res->message);
    for (int r = 0; x->verdict == PCL_SIM_PASS && r < pl->n_gpus; r++)
      if (x->seen[r] != 1) {
        x->verdict = PCL_SIM_ERROR;
        snprintf(x->msg, sizeof(x->msg), "the simulator reported rank %d %d times", r, x->seen[r]);
      }
  }
  free(res);
  if (x->verdict == PCL_SIM_PASS && c->nseg > 1)
    reference_segments(pl, c, &o, x);
}

/* ---- buffers and comparison ---- */

void xr_bufs(const xr_t *R, const xr_case_t *c, uint8_t *din, uint8_t *dout, uint8_t **in,
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

/* Bit for bit; two NaNs count as equal (the GPU and the host may produce different NaN payloads
 * from the same operands, e.g. inf - inf). */
static int same_bits(ncclDataType_t dt, const uint8_t *got, const uint8_t *want, uint64_t bytes,
                     uint64_t *bad) {
  size_t es = pcl_dtype_bytes(dt);
  for (uint64_t i = 0; i + es <= bytes; i += es) {
    if (memcmp(got + i, want + i, es) == 0)
      continue;
    if (pcl_dtype_is_float(dt) && isnan(pcl_sim_load(dt, got + i)) &&
        isnan(pcl_sim_load(dt, want + i)))
      continue;
    *bad = i;
    return 0;
  }
  return 1;
}

static void describe(const xr_case_t *c, char *buf, size_t len) {
  snprintf(buf, len, "%s %s %s %llu B %s %s root %d", c->plan->name, pcl_dtype_name(c->dt),
           pcl_sim_op_name(c->op), (unsigned long long)c->msg,
           c->inplace ? "in-place" : "out-of-place", c->ll8 ? "LL8" : "LL16", c->root);
}

void xr_fail(xp_plan_res_t *pr, const xr_case_t *c, const char *fmt, ...) {
  pr->fail++;
  if (pr->first_fail[0])
    return;
  char what[200], why[200];
  describe(c, what, sizeof(what));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  size_t n = strlen(what);
  xp_copy(pr->first_fail, sizeof(pr->first_fail), what);
  if (n + 2 < sizeof(pr->first_fail)) {
    memcpy(pr->first_fail + n, ": ", 3);
    xp_copy(pr->first_fail + n + 2, sizeof(pr->first_fail) - n - 2, why);
  }
}

/* Every rank learns whether any rank's kernels recorded an error (a collective step). */
int xr_any_kernel_error(xr_t *R, int *any) {
  int rank = R->rank;
  int mine[XP_MAXR];
  uint32_t e0 = 0, e1 = 0;
  pcl_exec_async_error(R->ctx[0], &e0);
  pcl_exec_async_error(R->ctx[1], &e1);
  mine[rank] = (e0 | e1) != 0;
  CK(pcl_bootstrap_allgather(R->boot, mine, sizeof(int)));
  *any = 0;
  for (int r = 0; r < R->g->nranks; r++)
    *any |= mine[r];
  return 0;
}

/* Output poisoned and input in, then (xr_launch_staged) the launch, on comm `comm`'s stream;
 * nothing waited for. The check macros name `rank`. */
int xr_stage(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din,
             uint8_t *dout) {
  int rank = R->rank;
  uint8_t *in, *out;
  xr_bufs(R, c, din, dout, &in, &out);
  CUCK(cudaMemsetAsync(dout, 0xa5, xr_region_bytes(c), R->st[comm]));
  CUCK(cudaMemcpyAsync(in, x->in[xr_ref_rank(R, c)], c->in_bytes, cudaMemcpyHostToDevice,
                       R->st[comm]));
  return 0;
}

int xr_launch_staged(xr_t *R, int comm, const xr_case_t *c, uint8_t *din, uint8_t *dout) {
  int rank = R->rank;
  uint8_t *in, *out;
  xr_bufs(R, c, din, dout, &in, &out);
  pcl_exec_args_t a = xr_args(c, in, out);
  CK(pcl_exec_launch(R->ctx[comm], c->plan, &a, R->st[comm]));
  return 0;
}

int xr_launch(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din,
              uint8_t *dout) {
  return xr_stage(R, comm, c, x, din, dout) || xr_launch_staged(R, comm, c, din, dout);
}

/* Output back and compared with the reference; *ok = 0 on a difference. */
int xr_check(xr_t *R, int comm, const xr_case_t *c, const xp_ref_t *x, uint8_t *din, uint8_t *dout,
             xp_plan_res_t *pr) {
  int rank = R->rank;
  uint8_t *in, *out;
  xr_bufs(R, c, din, dout, &in, &out);
  CUCK(cudaMemcpyAsync(R->h_out, out, c->out_bytes, cudaMemcpyDeviceToHost, R->st[comm]));
  CUCK(cudaStreamSynchronize(R->st[comm]));
  uint64_t bad = 0;
  const int v = xr_ref_rank(R, c);
  pr->cases++;
  if (c->plan->collective == PCL_PLAN_COLL_REDUCE && v != 0) {
    pr->pass++; /* only the root's output is defined */
    return 0;
  }
  if (x->out_bytes != c->out_bytes) {
    xr_fail(pr, c, "the simulator's output is %llu bytes, the GPU's %llu",
            (unsigned long long)x->out_bytes, (unsigned long long)c->out_bytes);
    return 0;
  }
  if (same_bits(c->dt, R->h_out, x->want[v], c->out_bytes, &bad)) {
    pr->pass++;
    return 0;
  }
  size_t es = pcl_dtype_bytes(c->dt);
  xr_fail(pr, c, "rank %d (root %d) byte %llu: GPU %g, simulator %g", rank, c->root,
          (unsigned long long)bad, pcl_sim_load(c->dt, R->h_out + bad / es * es),
          pcl_sim_load(c->dt, x->want[v] + bad / es * es));
  return 0;
}

int xr_ref_rank(const xr_t *R, const xr_case_t *c) {
  return pcl_exec_vrank(R->rank, pcl_plan_root_shift(c->plan, c->root), R->g->nranks);
}

/* The output buffer's bytes: in place it holds the input too (allgather's input is a slot of the
 * output, reducescatter's output a slot of the input). */
uint64_t xr_region_bytes(const xr_case_t *c) {
  return c->inplace && c->in_bytes > c->out_bytes ? c->in_bytes : c->out_bytes;
}

double xr_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void xr_usage_now(xr_usage_t *u) {
  memset(u, 0, sizeof(*u));
  DIR *d = opendir("/proc/self/fd");
  if (d != NULL) {
    for (struct dirent *e; (e = readdir(d)) != NULL;)
      u->fds += e->d_name[0] != '.';
    closedir(d);
    u->fds--; /* opendir's own */
  }
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
    sscanf(line, "Threads: %ld", &u->threads);
    sscanf(line, "VmRSS: %ld", &u->rss_kib);
  }
  if (f != NULL)
    fclose(f);
  u->allocs = (long)pcl_alloc_outstanding();
  size_t total = 0;
  cudaMemGetInfo(&u->gpu_free, &total);
}

pcl_exec_config_t xr_exec_config(const xr_t *R, pcl_memchan_t *mc, void *scratch,
                                 int64_t timeout_s) {
  pcl_exec_config_t e;
  memset(&e, 0, sizeof(e));
  e.cuda_dev = R->dev;
  e.rank = R->rank;
  e.nranks = R->g->nranks;
  e.memchan = mc;
  e.scratch = scratch;
  e.scratch_bytes = XR_SCRATCH_BYTES;
  e.timeout_s = timeout_s;
  e.dev_ranks = R->g->dev_ranks;
  return e;
}

pcl_exec_args_t xr_args_1k(const xr_t *R) {
  pcl_exec_args_t a;
  memset(&a, 0, sizeof(a));
  a.in = a.out = R->d_out;
  a.in_bytes = a.out_bytes = 1024;
  a.dtype = ncclFloat32;
  a.op = ncclSum;
  return a;
}

pcl_exec_args_t xr_args(const xr_case_t *c, uint8_t *in, uint8_t *out) {
  pcl_exec_args_t a;
  memset(&a, 0, sizeof(a));
  a.in = in;
  a.out = out;
  a.in_bytes = c->in_bytes;
  a.out_bytes = c->out_bytes;
  a.dtype = c->dt;
  a.op = c->op;
  a.force_ll8 = c->ll8;
  a.root = c->root;
  a.ub = c->ub;
  return a;
}
