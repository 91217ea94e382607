/* SPDX-License-Identifier: MIT
 * planccl-refbench: how much slower a plan runs than a hand-written kernel of the same algorithm
 * (bench/ref_*.cuh), side by side in one run: same ranks, buffers and launch shape. */

/* Ranks are threads of this process, rank r on GPU r % ngpus (one GPU: all ranks share it). The
 * plan side is set up as test/gpu/exec_plans.cu does, through the executor's public API only
 * (exec.h, plan.h, memchan.h, mem.h, bootstrap.h). Per (ranks, size): one eager call of the plan
 * and of the reference checked against the host result, then kernel time per call under CUDA graphs
 * (each rank captures K calls into its own graph, all ranks meet, each replays it R times between
 * two events; max over ranks) for the plan, the reference, an empty kernel and a plan of one
 * `nop` per block, the last three in the same grid and block size. One collective per run
 * (--coll, a row of ref_colls.cuh): the one-phase LL allreduce (ref_allreduce.cuh), the
 * two-phase LL allreduce (ref_allreduce2.cuh), the one-shot LL allgather (ref_allgather.cuh) or
 * reduce-scatter (ref_reducescatter.cuh), the LL broadcast from rank 0 (ref_broadcast.cuh) or
 * reduce to rank 0 (ref_reduce.cuh), the Simple allreduce whole or in 16 KiB units
 * (ref_allreduce_simple.cuh), sizes as planccl's registry counts them (allgather: the output,
 * reduce-scatter: the input). Exit: 0 ok, 1 mismatch or error, 2 usage, 77 no GPU.
 * Usage: planccl-refbench --help. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "exec.h"
#include "kernels.h" /* pcl_kernels_pdl */
#include "memchan.h"
#include "ref_colls.cuh"

#define RB_MAX_SIZES 64
/* Cases of a run: a size, or for most collectives a size in each placement. */
#define RB_MAX_CASES (2 * RB_MAX_SIZES)
#define RB_MAX_RUNS 3
#define RB_TIMEOUT_S 10
#define RB_DEFAULT_BLOCKS 8 /* reference shape where no plan runs a size (the N-rank plans') */
#define RB_DEFAULT_THREADS 512

/* RB_REFNOP: the reference kernel moving 0 bytes (its flag protocol or syncs alone), the control
 * of the nop plan. RB_EMPTYPDL: the empty kernel launched with programmatic dependent launch, the
 * floor of planned calls under PLANCCL_PDL=1. */
enum { RB_PLAN, RB_REF, RB_EMPTY, RB_NOP, RB_REFNOP, RB_EMPTYPDL, RB_KINDS };
static const char *const rb_kind_name[RB_KINDS] = {
    "plan", "reference", "empty kernel", "nop plan", "reference at 0 bytes", "empty kernel (PDL)"};

typedef struct {
  int ranks[RB_MAX_RUNS];
  int nruns;
  uint64_t sizes[RB_MAX_SIZES];
  int nsizes;
  int iters, reps;
  const char *plan_file; /* NULL: the shipped plans of coll; "none": reference only */
  int blocks, threads;   /* 0: not given */
  int csv;
  const pcl_ref_coll_t *coll; /* --coll's row */
} rb_opts_t;

/* One size (in one placement) of one run, decided before the rank threads start: identical on
 * all ranks. */
typedef struct {
  uint64_t bytes;               /* the message, as the registry counts it */
  uint64_t in_bytes, out_bytes; /* each rank's input and output (pcl_plan_buffer_bytes) */
  const pcl_plan_t *plan;       /* NULL: no plan runs this size */
  const pcl_plan_t *nop; /* one nop per block in (blocks, threads); NULL: could not be built */
  int blocks, threads;   /* the reference's, empty kernel's and nop plan's launch shape */
  int inplace;
  int ref_ok; /* 0: the reference cannot run this shape here (not co-resident); not measured */
} rb_case_t;

typedef struct {
  double us[RB_KINDS]; /* kernel time per call; < 0: not measured */
#ifdef PCL_KPROF
  pcl_kprof_t prof[3]; /* phase timing of block 0 over the timed replays: plan, nop, reference */
#endif
  long bad[2];        /* mismatching floats of the plan / reference check; -1: not checked */
  int failed;         /* the case's plan was refused */
  const char *kernel; /* the kernel the plan ran on (pcl_exec_kernel), NULL: not run */
} rb_res_t;

/* Shared by the rank threads of one run. */
typedef struct {
  int nranks, ngpus;
  int dev_ranks; /* the most ranks sharing one GPU */
  int ncases;
  int nplace; /* placements measured per size (1, or 2: in place, then out of place) */
  rb_case_t cases[RB_MAX_CASES];
  rb_res_t res[PCL_REF_MAX_RANKS][RB_MAX_CASES];
  pcl_bootstrap_handle_t handle;
  uint64_t max_bytes, plan_scratch_bytes, ref_half_bytes;
  int memchans; /* memory channels per peer (the most any plan of the run opens) */
  char *ref_scratch[PCL_REF_MAX_RANKS];
  int vote[PCL_REF_MAX_RANKS];
  int failed[PCL_REF_MAX_RANKS]; /* the rank thread gave up */
  unsigned arrived, gen, down;
  int aborted;
} rb_run_t;

typedef struct {
  rb_run_t *run;
  int rank, dev;
  pcl_bootstrap_t *boot;
  pcl_mem_alloc_t *scratch;
  pcl_memchan_t *mc;
  pcl_exec_ctx_t *ctx;
  cudaStream_t st;
  cudaEvent_t e0, e1;
  float *d_a, *d_b; /* input (and output when in place; rb_bufs) / output, max_bytes each */
  char *ref_scratch;
  uint64_t *ref_flags;
  uint32_t *ref_err;
  float *h_in, *h_out;
  pcl_ref_args_t ref;
#ifdef PCL_KPROF
  pcl_kprof_t *d_refprof; /* the reference's phase timers (RB_REF calls only) */
#endif
} rb_rank_t;

static rb_opts_t g_o;
static rb_run_t g_run;

static void rb_abort(rb_run_t *r) {
  __atomic_store_n(&r->aborted, 1, __ATOMIC_RELEASE);
}

static int rb_aborted(rb_run_t *r) {
  return __atomic_load_n(&r->aborted, __ATOMIC_ACQUIRE);
}

/* The rank threads' meeting point. It spins (yielding after a while) rather than sleeping: a
 * sleeping barrier wakes threads tens of microseconds apart and that skew would be timed. Reading
 * gen before arriving is safe: it cannot advance before this thread arrives. arrived is reset
 * before gen is published (release), so a thread that saw the new gen (acquire) and arrives at
 * the next barrier counts from 0. Returns -1 once any rank gave up (rb_abort), so a failed rank
 * never leaves the others waiting; the counts are then stale, which is why teardown has its own. */
static int rb_barrier(rb_run_t *r) {
  unsigned g = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&r->arrived, 1u, __ATOMIC_ACQ_REL) == (unsigned)r->nranks) {
    __atomic_store_n(&r->arrived, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&r->gen, g + 1, __ATOMIC_RELEASE);
  } else {
    for (unsigned long n = 0; __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE) == g; n++) {
      if (rb_aborted(r))
        return -1;
      if (n > 4096)
        sched_yield();
    }
  }
  return rb_aborted(r) ? -1 : 0;
}

/* Teardown: every thread comes here exactly once, failed or not, after synchronising its stream,
 * so nobody frees a scratch buffer that a peer's kernel may still write. Not abortable. */
static void rb_teardown_barrier(rb_run_t *r) {
  __atomic_add_fetch(&r->down, 1u, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&r->down, __ATOMIC_ACQUIRE) < (unsigned)r->nranks)
    sched_yield();
}

#define RB_FAIL(...)                                                                               \
  do {                                                                                             \
    fprintf(stderr, "planccl-refbench: rank %d: ", R->rank);                                       \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, " (line %d)\n", __LINE__);                                                     \
    rb_abort(R->run);                                                                              \
    return 1;                                                                                      \
  } while (0)
#define RB_CK(call)                                                                                \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess)                                                                         \
      RB_FAIL("%s -> %d", #call, (int)r_);                                                         \
  } while (0)
#define RB_CUCK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                         \
      RB_FAIL("%s -> %s", #call, cudaGetErrorString(e_));                                          \
  } while (0)

/* Every rank's vote on a decision that must be alike everywhere (a refused plan on one rank
 * would leave its peers spinning). Returns the AND of the votes, or -1 when the run aborted. */
static int rb_agree(rb_rank_t *R, int ok) {
  rb_run_t *r = R->run;
  r->vote[R->rank] = ok;
  if (rb_barrier(r))
    return -1;
  int all = 1;
  for (int i = 0; i < r->nranks; i++)
    all &= r->vote[i] != 0;
  if (rb_barrier(r)) /* nobody overwrites a vote before everyone read it */
    return -1;
  return all;
}

/* ---- the collective of the run (g_o.coll, a row of ref_colls.cuh) ----------------------- */

/* The case's buffers in d_a (and d_b out of place). In place, as NCCL places them (and
 * test/gpu/exec_rank.cu's xr_bufs): in == out, but allgather's input is this rank's chunk of the
 * output and reduce-scatter's output this rank's chunk of the input (pcl_ref_buf_t). */
static void rb_bufs(rb_rank_t *R, const rb_case_t *c, const void **in, void **out) {
  *in = R->d_a;
  *out = c->inplace ? (void *)R->d_a : (void *)R->d_b;
  if (!c->inplace)
    return;
  if (g_o.coll->buf == PCL_REF_BUF_GATHER)
    *in = (const char *)R->d_a + (uint64_t)R->rank * c->in_bytes;
  else if (g_o.coll->buf == PCL_REF_BUF_SCATTER)
    *out = (char *)R->d_a + (uint64_t)R->rank * c->out_bytes;
}

/* Launch arguments of a plan call on the case's buffers (the collective's in/out bytes). */
static pcl_exec_args_t rb_plan_args(const rb_case_t *c, const void *in, void *out) {
  pcl_exec_args_t a;
  memset(&a, 0, sizeof(a));
  a.in = in;
  a.out = out;
  a.in_bytes = c->in_bytes;
  a.out_bytes = c->out_bytes;
  a.dtype = ncclFloat32;
  a.op = ncclSum;
  return a;
}

/* One call of `kind` on R->st (eager or being captured); 0 or 1 with a message. */
static int rb_launch(rb_rank_t *R, const rb_case_t *c, int kind) {
  const void *in;
  void *out;
  rb_bufs(R, c, &in, &out);
  switch (kind) {
  case RB_PLAN: {
    pcl_exec_args_t a = rb_plan_args(c, in, out);
    RB_CK(pcl_exec_launch(R->ctx, c->plan, &a, R->st));
    return 0;
  }
  case RB_NOP: { /* an in-place plan: in-place buffers whatever the case's placement */
    pcl_exec_args_t a = {R->d_a, R->d_a, c->bytes, c->bytes, ncclFloat32, ncclSum, 0, 0, NULL};
    RB_CK(pcl_exec_launch(R->ctx, c->nop, &a, R->st));
    return 0;
  }
  case RB_REF:
  case RB_REFNOP:
    R->ref.in = in;
    R->ref.out = out;
    R->ref.bytes = kind == RB_REF ? c->bytes : 0;
#ifdef PCL_KPROF
    R->ref.prof = kind == RB_REF ? R->d_refprof : NULL;
#endif
    RB_CUCK(g_o.coll->launch(R->run->nranks, &R->ref, c->blocks, c->threads, R->st));
    return 0;
  case RB_EMPTYPDL:
    RB_CUCK(pcl_ref_empty_launch_pdl(c->blocks, c->threads, R->st));
    return 0;
  default:
    RB_CUCK(pcl_ref_empty_launch(c->blocks, c->threads, R->st));
    return 0;
  }
}

/* One eager call of the plan or the reference on fresh inputs, compared with the host result. */
static int rb_check(rb_rank_t *R, int ci, int kind) {
  const rb_case_t *c = &R->run->cases[ci];
  const int nranks = R->run->nranks;
  const unsigned salt = (unsigned)(ci * 2 + kind);
  const uint64_t n = c->out_bytes / sizeof(float), cn = c->bytes / sizeof(float) / nranks;
  const void *in;
  void *out;
  rb_bufs(R, c, &in, &out);
  for (uint64_t i = 0; i < c->in_bytes / sizeof(float); i++)
    R->h_in[i] = pcl_ref_value(R->rank, i, salt);
  /* All-ones bits: a NaN, so an unwritten word fails. In-place allgather's output holds the
   * input as one chunk, so it is poisoned before the input goes in; the other in-place outputs
   * are the input. */
  if (!c->inplace || g_o.coll->buf == PCL_REF_BUF_GATHER)
    RB_CUCK(cudaMemsetAsync(out, 0xff, c->out_bytes, R->st));
  RB_CUCK(cudaMemcpyAsync((void *)in, R->h_in, c->in_bytes, cudaMemcpyHostToDevice, R->st));
  if (rb_launch(R, c, kind))
    return 1;
  RB_CUCK(cudaMemcpyAsync(R->h_out, out, c->out_bytes, cudaMemcpyDeviceToHost, R->st));
  RB_CUCK(cudaStreamSynchronize(R->st));
  long bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    float want;
    if (!g_o.coll->want(nranks, R->rank, i, cn, salt, &want))
      continue; /* the collective leaves it undefined */
    if (memcmp(&want, &R->h_out[i], sizeof(float)) != 0) {
      if (bad == 0)
        fprintf(stderr,
                "planccl-refbench: rank %d: %s %s, %d ranks, %llu bytes, %s: float %llu is %g, "
                "want %g\n",
                R->rank, rb_kind_name[kind], g_o.coll->name, nranks, (unsigned long long)c->bytes,
                c->inplace ? "in place" : "out of place", (unsigned long long)i,
                (double)R->h_out[i], (double)want);
      bad++;
    }
  }
  R->run->res[R->rank][ci].bad[kind == RB_PLAN ? 0 : 1] = bad;
  return 0;
}

/* Kernel time per call of `kind`: K calls captured into this rank's own graph (thread-local
 * capture: the other ranks are threads of this process capturing at the same time), one replay
 * to warm up (it uploads the graph, and is paired with the peers' warm-up: every rank makes the
 * same calls so packet flags stay in lock-step), then all ranks meet and each times R replays. */
static int rb_time(rb_rank_t *R, int ci, int kind) {
  const rb_case_t *c = &R->run->cases[ci];
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  RB_CUCK(cudaStreamBeginCapture(R->st, cudaStreamCaptureModeThreadLocal));
  int bad = 0;
  for (int i = 0; i < g_o.iters && !bad; i++)
    bad = rb_launch(R, c, kind);
  cudaError_t e = cudaStreamEndCapture(R->st, &g);
  if (bad || e != cudaSuccess) {
    if (g != NULL)
      cudaGraphDestroy(g);
    if (bad)
      return 1;
    RB_FAIL("capturing the %s: %s", rb_kind_name[kind], cudaGetErrorString(e));
  }
  e = cudaGraphInstantiate(&ge, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess)
    RB_FAIL("cudaGraphInstantiate (%s): %s", rb_kind_name[kind], cudaGetErrorString(e));
  float ms = 0;
  int rc = 0;
  if ((e = cudaGraphLaunch(ge, R->st)) != cudaSuccess ||
      (e = cudaStreamSynchronize(R->st)) != cudaSuccess)
    rc = 2;
  else if (rb_barrier(R->run))
    rc = 1;
  else {
#ifdef PCL_KPROF
    pcl_kprof_t prof;
    if (kind == RB_PLAN || kind == RB_NOP)
      pcl_exec_prof_read(R->ctx, &prof, 1); /* the timed replays alone */
    if (kind == RB_REF && (cudaMemsetAsync(R->d_refprof, 0, sizeof(prof), R->st) != cudaSuccess ||
                           cudaStreamSynchronize(R->st) != cudaSuccess))
      (void)cudaGetLastError(); /* the breakdown is then missing, the timing still valid */
#endif
    e = cudaEventRecord(R->e0, R->st);
    for (int i = 0; i < g_o.reps && e == cudaSuccess; i++)
      e = cudaGraphLaunch(ge, R->st);
    if (e == cudaSuccess)
      e = cudaEventRecord(R->e1, R->st);
    if (e == cudaSuccess)
      e = cudaEventSynchronize(R->e1);
    if (e == cudaSuccess)
      e = cudaEventElapsedTime(&ms, R->e0, R->e1);
    if (e != cudaSuccess)
      rc = 2;
  }
#ifdef PCL_KPROF
  if (rc == 0 && (kind == RB_PLAN || kind == RB_NOP))
    pcl_exec_prof_read(R->ctx, &R->run->res[R->rank][ci].prof[kind == RB_NOP], 1);
  /* On R->st: the legacy stream's implicit synchronisation is no place next to spinning peers. */
  if (rc == 0 && kind == RB_REF &&
      (cudaMemcpyAsync(&R->run->res[R->rank][ci].prof[2], R->d_refprof, sizeof(pcl_kprof_t),
                       cudaMemcpyDeviceToHost, R->st) != cudaSuccess ||
       cudaStreamSynchronize(R->st) != cudaSuccess))
    (void)cudaGetLastError();
#endif
  cudaGraphExecDestroy(ge);
  if (rc == 2)
    RB_FAIL("replaying the %s: %s", rb_kind_name[kind], cudaGetErrorString(e));
  if (rc)
    return 1;
  R->run->res[R->rank][ci].us[kind] = (double)ms * 1000.0 / ((double)g_o.iters * g_o.reps);
  /* Every rank's kernels of this kind are done before any rank starts the next kind: kernels of
   * two kinds spinning on one GPU at once would need both shapes co-resident. */
  return rb_barrier(R->run) ? 1 : 0;
}

/* Kernel-side errors so far: the executor's error word and the reference's. */
static int rb_kernel_errors(rb_rank_t *R) {
  uint32_t kerr = 0, rerr = 0;
  if (pcl_exec_async_error(R->ctx, &kerr) != ncclSuccess)
    RB_FAIL("plan kernel error word %u (timeout %d s or abort)", kerr, RB_TIMEOUT_S);
  RB_CUCK(cudaMemcpyAsync(&rerr, R->ref_err, sizeof(rerr), cudaMemcpyDeviceToHost, R->st));
  RB_CUCK(cudaStreamSynchronize(R->st));
  if (rerr != 0)
    RB_FAIL("reference kernel error word %u (a packet wait timed out after %d s)", rerr,
            RB_TIMEOUT_S);
  return 0;
}

static int rb_case(rb_rank_t *R, int ci) {
  const rb_case_t *c = &R->run->cases[ci];
  const void *in;
  void *out;
  rb_bufs(R, c, &in, &out);
  pcl_exec_args_t a = rb_plan_args(c, in, out);
  pcl_exec_args_t anop = {R->d_a, R->d_a, c->bytes, c->bytes, ncclFloat32, ncclSum, 0, 0, NULL};
  /* pcl_exec_supported builds the program (allocates); prepare makes capture safe. */
  int plan_ok = c->plan != NULL && pcl_exec_supported(R->ctx, c->plan, &a) &&
                pcl_exec_prepare(R->ctx, c->plan, &a) == ncclSuccess;
  int nop_ok = c->nop != NULL && pcl_exec_supported(R->ctx, c->nop, &anop) &&
               pcl_exec_prepare(R->ctx, c->nop, &anop) == ncclSuccess;
  if ((plan_ok = rb_agree(R, plan_ok)) < 0 || (nop_ok = rb_agree(R, nop_ok)) < 0)
    return 1;
  if (plan_ok)
    R->run->res[R->rank][ci].kernel = pcl_exec_kernel(R->ctx, c->plan, &a);
  /* A plan picked for this size that the executor refuses is a failed case, not a skip. */
  if (c->plan != NULL && !plan_ok) {
    R->run->res[R->rank][ci].failed = 1;
    if (R->rank == 0)
      fprintf(stderr, "planccl-refbench: the executor refused %s at %llu bytes\n", c->plan->name,
              (unsigned long long)c->bytes);
  }
  if (plan_ok && rb_check(R, ci, RB_PLAN))
    return 1;
  if (rb_barrier(R->run))
    return 1;
  if (c->ref_ok && rb_check(R, ci, RB_REF))
    return 1;
  if (rb_barrier(R->run) || rb_kernel_errors(R))
    return 1;
  /* Timing runs on zeros: in-place sums stay 0 however often they repeat (no overflow to inf). */
  RB_CUCK(cudaMemsetAsync(R->d_a, 0, R->run->max_bytes, R->st));
  RB_CUCK(cudaMemsetAsync(R->d_b, 0, R->run->max_bytes, R->st));
  RB_CUCK(cudaStreamSynchronize(R->st));
  if (rb_barrier(R->run))
    return 1;
  if (plan_ok && rb_time(R, ci, RB_PLAN))
    return 1;
  if (c->ref_ok && rb_time(R, ci, RB_REF))
    return 1;
  if (rb_time(R, ci, RB_EMPTY))
    return 1;
  if (nop_ok && rb_time(R, ci, RB_NOP))
    return 1;
  if (c->ref_ok && rb_time(R, ci, RB_REFNOP))
    return 1;
  if (rb_time(R, ci, RB_EMPTYPDL))
    return 1;
  return rb_kernel_errors(R);
}

static int rb_rank_setup(rb_rank_t *R) {
  rb_run_t *run = R->run;
  RB_CUCK(cudaSetDevice(R->dev));
  RB_CK(pcl_bootstrap_create(&run->handle, R->rank, run->nranks, NULL, &R->boot));
  RB_CK(pcl_mem_alloc(R->dev, run->plan_scratch_bytes, PCL_MEM_ALLOC_AUTO, &R->scratch));
  pcl_memchan_config_t mcfg;
  memset(&mcfg, 0, sizeof(mcfg));
  mcfg.cuda_dev = R->dev;
  mcfg.nchannels = run->memchans;
  mcfg.scratch = R->scratch->ptr;
  mcfg.scratch_bytes = run->plan_scratch_bytes;
  RB_CK(pcl_memchan_create(R->boot, &mcfg, &R->mc));
  pcl_exec_config_t ecfg;
  memset(&ecfg, 0, sizeof(ecfg));
  ecfg.cuda_dev = R->dev;
  ecfg.rank = R->rank;
  ecfg.nranks = run->nranks;
  ecfg.memchan = R->mc;
  ecfg.portchan = NULL;
  ecfg.scratch = R->scratch->ptr;
  ecfg.scratch_bytes = run->plan_scratch_bytes;
  ecfg.timeout_s = RB_TIMEOUT_S;
  ecfg.dev_ranks = run->dev_ranks; /* the executor refuses plans whose grids would not all fit */
  RB_CK(pcl_exec_ctx_create(&ecfg, &R->ctx));
  RB_CUCK(cudaStreamCreateWithFlags(&R->st, cudaStreamNonBlocking));
  RB_CUCK(cudaEventCreate(&R->e0));
  RB_CUCK(cudaEventCreate(&R->e1));
  RB_CUCK(cudaMalloc((void **)&R->d_a, run->max_bytes));
  RB_CUCK(cudaMalloc((void **)&R->d_b, run->max_bytes));
  RB_CUCK(cudaMalloc((void **)&R->ref_scratch, 2 * run->ref_half_bytes));
  RB_CUCK(cudaMalloc((void **)&R->ref_flags, PCL_REF_MAX_SLOTS * sizeof(uint64_t)));
  RB_CUCK(cudaMalloc((void **)&R->ref_err, sizeof(uint32_t)));
#ifdef PCL_KPROF
  RB_CUCK(cudaMalloc((void **)&R->d_refprof, sizeof(pcl_kprof_t)));
  RB_CUCK(cudaMemsetAsync(R->d_refprof, 0, sizeof(pcl_kprof_t), R->st));
#endif
  /* On R->st, not the legacy stream (which a non-blocking stream does not wait for), and done
   * before the barrier below: peers write this scratch as soon as they know its address. */
  RB_CUCK(cudaMemsetAsync(R->ref_scratch, 0, 2 * run->ref_half_bytes, R->st));
  RB_CUCK(cudaMemsetAsync(R->ref_flags, 0, PCL_REF_MAX_SLOTS * sizeof(uint64_t), R->st));
  RB_CUCK(cudaMemsetAsync(R->ref_err, 0, sizeof(uint32_t), R->st));
  RB_CUCK(cudaStreamSynchronize(R->st));
  R->h_in = (float *)malloc(run->max_bytes);
  R->h_out = (float *)malloc(run->max_bytes);
  if (R->h_in == NULL || R->h_out == NULL)
    RB_FAIL("out of host memory");
  /* One process: a peer's cudaMalloc pointer is valid here as is (same device, or another one
   * with peer access, which main enabled between every pair of devices in use). */
  run->ref_scratch[R->rank] = R->ref_scratch;
  if (rb_barrier(run))
    return 1;
  memset(&R->ref, 0, sizeof(R->ref));
  for (int s = 0; s < run->nranks; s++)
    R->ref.scratch[s] = run->ref_scratch[s];
  R->ref.half_bytes = run->ref_half_bytes;
  R->ref.flags = R->ref_flags;
  R->ref.error = R->ref_err;
  R->ref.timeout_ns = (uint64_t)RB_TIMEOUT_S * 1000000000ull;
  R->ref.rank = R->rank;
  return 0;
}

static void rb_rank_teardown(rb_rank_t *R) {
  if (rb_aborted(R->run) && R->ctx != NULL)
    pcl_exec_abort(R->ctx); /* our plan kernels give up now; the reference's time out */
  if (R->st != NULL)
    cudaStreamSynchronize(R->st); /* bounded: every spin gives up after RB_TIMEOUT_S */
  rb_teardown_barrier(R->run);
  pcl_exec_ctx_destroy(R->ctx);
  if (R->st != NULL)
    cudaStreamDestroy(R->st);
  if (R->e0 != NULL)
    cudaEventDestroy(R->e0);
  if (R->e1 != NULL)
    cudaEventDestroy(R->e1);
  pcl_memchan_destroy(R->mc);
  pcl_mem_free(R->scratch);
  cudaFree(R->d_a);
  cudaFree(R->d_b);
  cudaFree(R->ref_scratch);
  cudaFree(R->ref_flags);
  cudaFree(R->ref_err);
#ifdef PCL_KPROF
  cudaFree(R->d_refprof);
#endif
  free(R->h_in);
  free(R->h_out);
  pcl_bootstrap_destroy(R->boot);
}

static void *rb_rank_main(void *p) {
  rb_rank_t *R = (rb_rank_t *)p;
  int rc = rb_rank_setup(R);
  for (int ci = 0; rc == 0 && ci < R->run->ncases; ci++)
    rc = rb_case(R, ci);
  if (rc != 0) {
    rb_abort(R->run);
    R->run->failed[R->rank] = 1;
  }
  rb_rank_teardown(R);
  return NULL;
}

/* ---- plans ------------------------------------------------------------------------------- */

static int rb_readable(const char *path) {
  return access(path, R_OK) == 0;
}

/* Directories holding the default and opt-in plans: PCL_SOURCE_DIR, then the install prefix of
 * this executable (<prefix>/bin/planccl-refbench), then the source tree it was built from. */
static int rb_plan_dirs(int which, char *out, size_t n) {
  const char *src = getenv("PCL_SOURCE_DIR");
  if (which == 0 && src != NULL)
    return snprintf(out, n, "%s/plans", src) < (int)n ? 0 : -1;
  if (which == 1) {
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (l <= 0)
      return -1;
    exe[l] = '\0';
    for (int up = 0; up < 2; up++) {
      char *slash = strrchr(exe, '/');
      if (slash == NULL)
        return -1;
      *slash = '\0';
    }
    return snprintf(out, n, "%s/share/planccl/plans", exe) < (int)n ? 0 : -1;
  }
#ifdef PCL_REFBENCH_SOURCE_DIR
  if (which == 2)
    return snprintf(out, n, "%s/plans", PCL_REFBENCH_SOURCE_DIR) < (int)n ? 0 : -1;
#endif
  return -1;
}

/* `rel` of the default set (extra = 0) or the opt-in set (extra = 1) in the first directory
 * that has it. The source tree keeps the opt-in set in plans/extra, an install in plans-extra. */
static int rb_find_plan(const char *rel, int extra, char *out, size_t n) {
  for (int which = 0; which < 3; which++) {
    char dir[PATH_MAX];
    if (rb_plan_dirs(which, dir, sizeof(dir)) != 0)
      continue;
    int k = extra ? snprintf(out, n, "%s%s/%s", dir, which == 1 ? "-extra" : "/extra", rel)
                  : snprintf(out, n, "%s/%s", dir, rel);
    if (k > 0 && k < (int)n && rb_readable(out))
      return 0;
  }
  return -1;
}

/* Loads and checks a plan for an N-rank fp32 (sum) call of the run's collective; NULL with a
 * message otherwise. */
static pcl_plan_t *rb_load_plan(const char *path, int nranks) {
  char err[512];
  pcl_plan_t *p = NULL;
  if (pcl_plan_load(path, &p, err, sizeof(err)) != ncclSuccess) {
    fprintf(stderr, "planccl-refbench: %s\n", err);
    return NULL;
  }
  const char *why = NULL;
  char not_it[64];
  snprintf(not_it, sizeof(not_it), "is not %s (see --coll)", g_o.coll->a_plan);
  if (p->collective != g_o.coll->coll)
    why = not_it;
  else if (p->n_gpus != nranks)
    why = "has another number of ranks";
  else if (!pcl_plan_accepts_op(p, (int)ncclSum))
    why = "does not compute sums";
  else if (p->max_blocks > PCL_REF_MAX_SLOTS)
    why = "has more blocks than the reference takes";
  if (why != NULL) {
    fprintf(stderr, "planccl-refbench: %s %s (for %d ranks)\n", path, why, nranks);
    pcl_plan_destroy(p);
    return NULL;
  }
  return p;
}

static int rb_cat(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= cap - *len)
    return -1;
  *len += (size_t)k;
  return 0;
}

/* A plan whose every block runs one nop (a __syncthreads): what the interpreter costs before
 * any op does work. As test/gpu/exec_plans.cu builds it, for nranks ranks. */
static pcl_plan_t *rb_nop_plan(int nranks, int blocks, int threads) {
  size_t cap = (size_t)nranks * ((size_t)blocks * 96 + 256) + 512, len = 0;
  char *json = (char *)malloc(cap), err[512];
  if (json == NULL)
    return NULL;
  int bad = rb_cat(json, cap, &len,
                   "{\"name\":\"nop_%dx%d\",\"collective\":\"allreduce\",\"protocol\":\"Simple\","
                   "\"inplace\":true,\"num_threads_per_block\":%d,\"gpus\":[",
                   blocks, threads, threads);
  for (int r = 0; r < nranks && !bad; r++) {
    bad |= rb_cat(json, cap, &len,
                  "%s{\"id\":%d,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
                  "\"channels\":[],\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[",
                  r ? "," : "", r);
    for (int b = 0; b < blocks && !bad; b++)
      bad |= rb_cat(json, cap, &len,
                    "%s{\"id\":%d,\"channels\":[],\"remote_buffer_refs\":[],"
                    "\"ops\":[{\"name\":\"nop\"}]}",
                    b ? "," : "", b);
    bad |= rb_cat(json, cap, &len, "]}");
  }
  bad |= rb_cat(json, cap, &len, "]}");
  pcl_plan_t *p = NULL;
  if (!bad && pcl_plan_load_buffer("nop.json", json, len, &p, err, sizeof(err)) != ncclSuccess) {
    fprintf(stderr, "planccl-refbench: nop plan %dx%d: %s\n", blocks, threads, err);
    p = NULL;
  }
  free(json);
  return p;
}

/* Memory channels to one peer that the plan opens at most (memchan's nchannels must cover it). */
static int rb_chans_per_peer(const pcl_plan_t *p) {
  int best = 1;
  for (int g = 0; g < p->n_gpus; g++) {
    int cnt[PCL_REF_MAX_RANKS] = {0};
    for (int k = 0; k < p->gpus[g].n_channels[PCL_PLAN_CHAN_MEMORY]; k++) {
      int peer = p->gpus[g].channels[PCL_PLAN_CHAN_MEMORY][k].peer;
      if (peer >= 0 && peer < PCL_REF_MAX_RANKS && ++cnt[peer] > best)
        best = cnt[peer];
    }
  }
  return best;
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr,
          "usage: planccl-refbench [options]\n"
          "  --coll C            allreduce (default; one-phase), allreduce2 (two-phase),\n"
          "                      allgather, reducescatter, broadcast or reduce (root 0),\n"
          "                      allreduce_simple or allreduce_simple_pipe (Simple protocol):\n"
          "                      the plans and the hand-written reference of that collective\n"
          "  --ranks N[,N..]     ranks (2, 4, 8) as threads of this process, rank r on GPU\n"
          "                      r %% ngpus (default 2)\n"
          "  --sizes S[,S..]     message bytes, K/M suffixes, multiples of 16 (default 1K,8K,64K)\n"
          "                      as planccl's registry counts them: allgather the output,\n"
          "                      reducescatter the input (both, allreduce2 and the Simple\n"
          "                      allreduces: multiples of 16 x ranks)\n"
          "  -b MIN -e MAX -f F  or a sweep MIN, MIN*F, .. MAX (F default 2)\n"
          "  --iters K           calls captured per CUDA graph (default 50)\n"
          "  --reps R            timed replays of the graph (default 20)\n"
          "  --plan FILE|none    this plan for every size (default: the shipped one-phase LL\n"
          "                      allreduce plans, in-place, picked by size; for the others\n"
          "                      the opt-in plans (allreduce2: ll2, allreduce_simple(_pipe):\n"
          "                      simple(_pipe), the rest: ll), in-place and out-of-place,\n"
          "                      each size in both; none: no plan)\n"
          "  --blocks B --threads T  the reference's launch shape (default: the plan's;\n"
          "                      %d x %d where no plan runs the size)\n"
          "  --csv               comma-separated output\n"
          "Plans are found under $PCL_SOURCE_DIR/plans, <prefix>/share/planccl/plans(-extra) or\n"
          "the source tree this was built from. fp32 (sum); time = kernel time per call under\n"
          "CUDA graphs, max over ranks. Exit 0 ok, 1 mismatch or error, 2 usage, 77 no GPU.\n",
          RB_DEFAULT_BLOCKS, RB_DEFAULT_THREADS);
}

static int rb_parse_bytes(const char *s, uint64_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v <= 0)
    return -1;
  switch (*end) {
  case 'K':
  case 'k':
    v *= 1024;
    end++;
    break;
  case 'M':
  case 'm':
    v *= 1024 * 1024;
    end++;
    break;
  case 'G':
  case 'g':
    v *= 1024.0 * 1024 * 1024;
    end++;
    break;
  default:
    break;
  }
  if (*end != '\0' || v > 1e15)
    return -1;
  *out = (uint64_t)v;
  return 0;
}

static int rb_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

static void rb_fmt_size(uint64_t b, char *buf, size_t n) {
  if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, n, "%lluM", (unsigned long long)(b >> 20));
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(buf, n, "%lluK", (unsigned long long)(b >> 10));
  else
    snprintf(buf, n, "%llu", (unsigned long long)b);
}

#define RB_STR(x) #x
#define RB_XSTR(x) RB_STR(x) /* a macro's value as a string literal */

/* What rb_parse_args gathers before it can settle the sizes. */
typedef struct {
  uint64_t minb, maxb;
  double factor;
  int sweep, have_sizes;
} rb_parse_t;

/* --ranks or --sizes: a comma-separated list, replacing any earlier one. */
static int rb_parse_list(const char *arg, int ranks, rb_parse_t *ps) {
  char list[1024];
  snprintf(list, sizeof(list), "%s", arg);
  if (ranks)
    g_o.nruns = 0;
  else
    g_o.nsizes = 0, ps->have_sizes = 1;
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (ranks) {
      int n;
      if (rb_parse_int(t, 2, 8, &n) || (n != 2 && n != 4 && n != 8) || g_o.nruns == RB_MAX_RUNS) {
        fprintf(stderr, "planccl-refbench: --ranks takes up to 3 of 2, 4, 8, not '%s'\n", t);
        return -1;
      }
      g_o.ranks[g_o.nruns++] = n;
    } else {
      uint64_t b;
      if (rb_parse_bytes(t, &b) || g_o.nsizes == RB_MAX_SIZES) {
        fprintf(stderr, "planccl-refbench: bad size '%s' (or more than %d)\n", t, RB_MAX_SIZES);
        return -1;
      }
      g_o.sizes[g_o.nsizes++] = b;
    }
  }
  return 0;
}

/* One option `a` that takes a value `v`; 0, or -1 with a message. */
static int rb_parse_value(const char *a, const char *v, rb_parse_t *ps) {
  if (!strcmp(a, "--ranks") || !strcmp(a, "--sizes"))
    return rb_parse_list(v, !strcmp(a, "--ranks"), ps);
  const char *why = NULL;
  if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
    ps->sweep = 1;
    if (rb_parse_bytes(v, !strcmp(a, "-b") ? &ps->minb : &ps->maxb))
      why = "a size";
  } else if (!strcmp(a, "-f")) {
    ps->factor = atof(v);
    ps->sweep = 1;
  } else if (!strcmp(a, "--iters")) {
    if (rb_parse_int(v, 1, 100000, &g_o.iters))
      why = "1..100000";
  } else if (!strcmp(a, "--reps")) {
    if (rb_parse_int(v, 1, 100000, &g_o.reps))
      why = "1..100000";
  } else if (!strcmp(a, "--blocks")) {
    if (rb_parse_int(v, 1, PCL_REF_MAX_SLOTS, &g_o.blocks))
      why = "1.." RB_XSTR(PCL_REF_MAX_SLOTS);
  } else if (!strcmp(a, "--threads")) {
    if (rb_parse_int(v, 32, 1024, &g_o.threads))
      why = "32..1024";
  } else if (!strcmp(a, "--coll")) {
    if ((g_o.coll = pcl_ref_coll_find(v)) == NULL)
      why = "allreduce, allreduce2, allgather, reducescatter, broadcast, reduce, "
            "allreduce_simple or allreduce_simple_pipe";
  } else { /* --plan */
    g_o.plan_file = v;
  }
  if (why != NULL)
    fprintf(stderr, "planccl-refbench: %s takes %s, not '%s'\n", a, why, v);
  return why != NULL ? -1 : 0;
}

/* The sizes, once every option is known: the sweep or the default, each checked against the
 * collective and every run's rank count. */
static int rb_parse_sizes(const rb_parse_t *ps) {
  if (ps->sweep) {
    if (ps->have_sizes || ps->minb == 0 || ps->maxb < ps->minb || !(ps->factor > 1)) {
      fprintf(stderr, "planccl-refbench: -b/-e/-f need 0 < MIN <= MAX, F > 1, and no --sizes\n");
      return -1;
    }
    g_o.nsizes = 0;
    for (double s = (double)ps->minb; s <= (double)ps->maxb * 1.0001 && g_o.nsizes < RB_MAX_SIZES;
         s *= ps->factor)
      g_o.sizes[g_o.nsizes++] = (uint64_t)s;
  } else if (!ps->have_sizes) {
    g_o.sizes[0] = 1024, g_o.sizes[1] = 8192, g_o.sizes[2] = 65536;
    g_o.nsizes = 3;
  }
  for (int s = 0; s < g_o.nsizes; s++)
    if (g_o.sizes[s] % 16 != 0 || g_o.sizes[s] == 0 || g_o.sizes[s] > (1ull << 30)) {
      fprintf(stderr,
              "planccl-refbench: size %llu: sizes must be multiples of 16 bytes (LL16 "
              "packets carry 8, blocks take 16-byte units), at most 1G\n",
              (unsigned long long)g_o.sizes[s]);
      return -1;
    }
  /* Allgather, reduce-scatter and the two-phase allreduce split the message into one chunk per
   * rank, each of whole 16-byte units (as the plans' buffer_alignment and the reference's block
   * split need). */
  for (int k = 0; k < g_o.nruns && g_o.coll->chunked; k++)
    for (int s = 0; s < g_o.nsizes; s++)
      if (g_o.sizes[s] % (16ull * (uint64_t)g_o.ranks[k]) != 0) {
        fprintf(stderr,
                "planccl-refbench: size %llu: %s sizes for %d ranks must be multiples of "
                "%d bytes (a chunk of whole 16-byte units per rank)\n",
                (unsigned long long)g_o.sizes[s], g_o.coll->name, g_o.ranks[k], 16 * g_o.ranks[k]);
        return -1;
      }
  return 0;
}

/* 0 ok, 1 --help, -1 usage error (with a message). */
static int rb_parse_args(int argc, char **argv) {
  rb_parse_t ps;
  memset(&ps, 0, sizeof(ps));
  ps.factor = 2;
  g_o.iters = 50;
  g_o.reps = 20;
  g_o.coll = &pcl_ref_colls[0];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      return 1;
    } else if (!strcmp(a, "--csv")) {
      g_o.csv = 1;
    } else if (strcmp(a, "--ranks") && strcmp(a, "--sizes") && strcmp(a, "-b") && strcmp(a, "-e") &&
               strcmp(a, "-f") && strcmp(a, "--iters") && strcmp(a, "--reps") &&
               strcmp(a, "--blocks") && strcmp(a, "--threads") && strcmp(a, "--plan") &&
               strcmp(a, "--coll")) {
      fprintf(stderr, "planccl-refbench: unknown option %s\n", a);
      return -1;
    } else if (v == NULL) {
      fprintf(stderr, "planccl-refbench: %s needs a value\n", a);
      return -1;
    } else if (rb_parse_value(a, argv[++i], &ps) != 0) {
      return -1;
    }
  }
  if (g_o.nruns == 0)
    g_o.ranks[g_o.nruns++] = 2;
  return rb_parse_sizes(&ps);
}

/* The shipped default plans of the run's collective for N ranks, as paths relative to the plan
 * directories: the in-place one-phase LL allreduce plans (2 ranks: three, by size; others: the
 * opt-in one), or the collective's opt-in plans (pcl_ref_coll_t's plan_dir and plan_algo), in
 * place and out of place. Returns how many, and whether they are opt-in (*extra). */
static int rb_default_plans(int nranks, char rel[][128], int *extra) {
  static const char *const two[] = {"allreduce/2gpu_ll1_small_inplace.json",
                                    "allreduce/2gpu_ll1_inplace.json",
                                    "allreduce/2gpu_ll1_large_inplace.json"};
  const pcl_ref_coll_t *c = g_o.coll;
  if (c->plan_algo != NULL) {
    snprintf(rel[0], 128, "%s/%dgpu_%s_inplace.json", c->plan_dir, nranks, c->plan_algo);
    snprintf(rel[1], 128, "%s/%dgpu_%s_outofplace.json", c->plan_dir, nranks, c->plan_algo);
    *extra = 1;
    return 2;
  }
  *extra = nranks != 2;
  if (nranks != 2) {
    snprintf(rel[0], 128, "allreduce/%dgpu_ll1_inplace.json", nranks);
    return 1;
  }
  for (int k = 0; k < 3; k++)
    snprintf(rel[k], 128, "%s", two[k]);
  return 3;
}

/* The plans of one run: --plan's, or the shipped defaults (rb_default_plans). */
static int rb_load_run_plans(int nranks, pcl_plan_t **plans, int *np) {
  *np = 0;
  if (g_o.plan_file != NULL) {
    if (!strcmp(g_o.plan_file, "none"))
      return 0;
    if ((plans[0] = rb_load_plan(g_o.plan_file, nranks)) == NULL)
      return -1;
    *np = 1;
    return 0;
  }
  char rel[3][128], path[PATH_MAX];
  int extra = 0;
  const int n = rb_default_plans(nranks, rel, &extra);
  for (int k = 0; k < n; k++) {
    if (rb_find_plan(rel[k], extra, path, sizeof(path)) != 0) {
      fprintf(stderr,
              "planccl-refbench: cannot find %s%s (set PCL_SOURCE_DIR to the source tree, "
              "or pass --plan)\n",
              extra ? "the opt-in plan " : "", rel[k]);
      return -1;
    }
    if ((plans[*np] = rb_load_plan(path, nranks)) == NULL)
      return -1;
    (*np)++;
  }
  return 0;
}

/* The placements a run measures per size (1 = in place, 0 = out of place), in this order: those
 * of its plans, in the plans' order; without plans, in place alone for the one-phase allreduce
 * (the shipped plans' placement) and both for the others (both_places). Returns how many (1 or
 * 2). */
static int rb_placements(pcl_plan_t *const *plans, int np, int place[2]) {
  int n = 0;
  for (int k = 0; k < np && n < 2; k++)
    if (n == 0 || place[0] != plans[k]->inplace)
      place[n++] = plans[k]->inplace != 0;
  if (n == 0) {
    place[n++] = 1;
    if (g_o.coll->both_places)
      place[n++] = 0;
  }
  return n;
}

/* The case's plan (the first of its placement that runs its size), launch shape and whether the
 * reference's blocks of all ranks sharing a GPU fit it at once (they spin on each other). */
static void rb_plan_case(rb_case_t *c, pcl_plan_t *const *plans, int np, int per_gpu, int sms) {
  for (int k = 0; k < np && c->plan == NULL; k++)
    if ((plans[k]->inplace != 0) == c->inplace && pcl_plan_size_runnable(plans[k], c->bytes))
      c->plan = plans[k];
  c->blocks = c->plan ? c->plan->max_blocks : RB_DEFAULT_BLOCKS;
  c->threads = c->plan ? c->plan->num_threads_per_block : RB_DEFAULT_THREADS;
  if (g_o.blocks)
    c->blocks = g_o.blocks;
  if (g_o.threads)
    c->threads = g_o.threads;
  int bps = pcl_ref_blocks_per_sm(g_o.coll->kernel_of(g_run.nranks), c->threads);
  c->ref_ok = bps > 0 && (long)per_gpu * c->blocks <= (long)bps * sms;
  if (!c->ref_ok)
    fprintf(stderr,
            "planccl-refbench: %d ranks per GPU x %d blocks of %d threads of the "
            "reference do not fit the GPU at once (%d per SM, %d SMs): not measured\n",
            per_gpu, c->blocks, c->threads, bps, sms);
}

/* Fills g_run's cases for nranks: per size and placement the plan, the shape, the nop plan, and
 * the scratch sizes. */
static void rb_plan_run(int nranks, int ngpus, pcl_plan_t **plans, int np, pcl_plan_t **nops,
                        int *nnops, int sms) {
  memset(&g_run, 0, sizeof(g_run));
  g_run.nranks = nranks;
  g_run.ngpus = ngpus;
  int place[2];
  g_run.nplace = rb_placements(plans, np, place);
  g_run.ncases = g_o.nsizes * g_run.nplace;
  g_run.memchans = 1;
  uint64_t plan_scratch = 1u << 20;
  *nnops = 0;
  const int per_gpu = (nranks + ngpus - 1) / ngpus;
  g_run.dev_ranks = per_gpu;
  for (int ci = 0; ci < g_run.ncases; ci++) {
    rb_case_t *c = &g_run.cases[ci];
    c->bytes = g_o.sizes[ci / g_run.nplace];
    c->inplace = place[ci % g_run.nplace];
    pcl_ref_buffer_bytes(g_o.coll, nranks, c->bytes, &c->in_bytes, &c->out_bytes);
    if (c->bytes > g_run.max_bytes)
      g_run.max_bytes = c->bytes;
    rb_plan_case(c, plans, np, per_gpu, sms);
    if (c->plan != NULL) {
      uint64_t sb = pcl_plan_scratch_bytes(c->plan, c->bytes);
      if (2 * sb > plan_scratch)
        plan_scratch = 2 * sb;
      int m = rb_chans_per_peer(c->plan);
      if (m > g_run.memchans)
        g_run.memchans = m;
    }
    for (int k = 0; k < *nnops && c->nop == NULL; k++)
      if (nops[k]->max_blocks == c->blocks && nops[k]->num_threads_per_block == c->threads)
        c->nop = nops[k];
    if (c->nop == NULL && c->blocks <= PCL_PLAN_MAX_BLOCKS) {
      pcl_plan_t *p = rb_nop_plan(nranks, c->blocks, c->threads);
      if (p != NULL)
        c->nop = nops[(*nnops)++] = p;
    }
  }
  g_run.plan_scratch_bytes = plan_scratch;
  g_run.ref_half_bytes = g_o.coll->half_bytes(nranks, g_run.max_bytes);
}

typedef struct {
  int n;
  double max_ratio, log_sum;
  int max_ranks;
  uint64_t max_bytes;
  long mismatches;
  int errors;
} rb_summary_t;

static void rb_print_us(double v, char *buf, size_t n) {
  if (v < 0)
    snprintf(buf, n, "-");
  else
    snprintf(buf, n, "%.3f", v);
}

#ifdef PCL_KPROF
/* Rank 0's block 0, ns per call: prologue (program + context), each top-level op, epilogue
 * (flag slots, avg), and the gap between one call's end and the next call's start. */
static void rb_print_prof(const char *what, const pcl_kprof_t *p) {
  if (p->calls == 0 || p->clk_total == 0)
    return;
  double ns_per_clk = (double)p->ns_total / (double)p->clk_total, n = (double)p->calls;
  printf("#   %-4s breakdown ns/call: total %.0f | ready %.0f", what, p->ns_total / n,
         p->clk_ready * ns_per_clk / n);
  for (uint32_t i = 0; i < p->nops && i < PCL_KABI_MAX_OPS; i++)
    printf(" | op%u %.0f", i, p->clk_op[i] * ns_per_clk / n);
  printf(" | tail %.0f | gap before %.0f (%.2f GHz)\n", p->clk_tail * ns_per_clk / n,
         p->gaps ? (double)p->ns_gap / (double)p->gaps : 0.0, 1.0 / ns_per_clk);
}
#endif

static void rb_report(rb_summary_t *sum) {
  for (int ci = 0; ci < g_run.ncases; ci++) {
    const rb_case_t *c = &g_run.cases[ci];
    double us[RB_KINDS];
    long bad[2] = {-1, -1};
    for (int k = 0; k < RB_KINDS; k++) {
      us[k] = -1;
      for (int r = 0; r < g_run.nranks; r++) {
        double v = g_run.res[r][ci].us[k];
        if (v < 0) { /* a rank that did not measure it: the kind is not reported */
          us[k] = -1;
          break;
        }
        if (v > us[k])
          us[k] = v;
      }
    }
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < g_run.nranks; r++)
        if (g_run.res[r][ci].bad[k] >= 0)
          bad[k] = (bad[k] < 0 ? 0 : bad[k]) + g_run.res[r][ci].bad[k];
    char size[32], f[RB_KINDS][32], ratio[32] = "-", pshape[32] = "-", rshape[32], bw[2][32];
    rb_fmt_size(c->bytes, size, sizeof(size));
    for (int k = 0; k < RB_KINDS; k++)
      rb_print_us(us[k], f[k], sizeof(f[k]));
    for (int k = 0; k < 2; k++) /* algorithm bandwidth, GB/s: bytes / time (k: RB_PLAN, RB_REF) */
      if (us[k] > 0)
        snprintf(bw[k], sizeof(bw[k]), "%.1f", (double)c->bytes / (us[k] * 1e3));
      else
        snprintf(bw[k], sizeof(bw[k]), "-");
    if (us[RB_PLAN] > 0 && us[RB_REF] > 0) {
      double q = us[RB_PLAN] / us[RB_REF];
      snprintf(ratio, sizeof(ratio), "%.3f", q);
      sum->n++;
      sum->log_sum += log(q);
      if (q > sum->max_ratio) {
        sum->max_ratio = q;
        sum->max_ranks = g_run.nranks;
        sum->max_bytes = c->bytes;
      }
    }
    if (c->plan != NULL)
      snprintf(pshape, sizeof(pshape), "%dx%d", c->plan->max_blocks,
               c->plan->num_threads_per_block);
    snprintf(rshape, sizeof(rshape), "%dx%d", c->blocks, c->threads);
    const char *check = "ok";
    if (bad[0] > 0 || bad[1] > 0)
      check = bad[0] > 0 && bad[1] > 0 ? "MISMATCH(both)"
              : bad[0] > 0             ? "MISMATCH(plan)"
                                       : "MISMATCH(ref)";
    for (int k = 0; k < 2; k++)
      if (bad[k] > 0)
        sum->mismatches += bad[k];
    /* Where no plan names the placement, the row says it (two rows per size). */
    const char *noplan = g_run.nplace < 2 ? "-" : c->inplace ? "- (in-place)" : "- (out-of-place)";
    char name[160];
    snprintf(name, sizeof(name), "%s%s%s%s", c->plan ? c->plan->name : noplan,
             g_run.res[0][ci].kernel ? " (" : "",
             g_run.res[0][ci].kernel ? g_run.res[0][ci].kernel : "",
             g_run.res[0][ci].kernel ? ")" : "");
    if (g_o.csv)
      printf("%s,%d,%llu,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", g_o.coll->name, g_run.nranks,
             (unsigned long long)c->bytes, f[RB_PLAN], f[RB_REF], ratio, bw[0], bw[1], f[RB_EMPTY],
             f[RB_NOP], f[RB_REFNOP], f[RB_EMPTYPDL], pshape, rshape, check, name);
    else
      printf("%5d %7s %9s %9s %7s %8s %8s %9s %9s %9s %9s %10s %10s %-14s %s\n", g_run.nranks, size,
             f[RB_PLAN], f[RB_REF], ratio, bw[0], bw[1], f[RB_EMPTY], f[RB_NOP], f[RB_REFNOP],
             f[RB_EMPTYPDL], pshape, rshape, check, name);
#ifdef PCL_KPROF
    if (!g_o.csv) {
      rb_print_prof("plan", &g_run.res[0][ci].prof[0]);
      rb_print_prof("ref", &g_run.res[0][ci].prof[2]);
      rb_print_prof("nop", &g_run.res[0][ci].prof[1]);
    }
#endif
  }
  for (int r = 0; r < g_run.nranks; r++) {
    sum->errors += g_run.failed[r];
    for (int ci = 0; ci < g_run.ncases; ci++)
      sum->errors += g_run.res[r][ci].failed;
  }
}

/* Peer access between every pair of the `used` GPUs, and the reference's kernels loaded on each:
 * the reference reaches peers' scratch (cudaMalloc) by plain pointers, and lazy loading could
 * wait behind a spinning kernel. 0 or -1 with a message. */
static int rb_setup_devices(int used) {
  cudaError_t e;
  for (int d = 0; d < used; d++) {
    if ((e = cudaSetDevice(d)) != cudaSuccess ||
        (e = pcl_ref_load(g_o.coll->kernel_of)) != cudaSuccess) {
      fprintf(stderr, "planccl-refbench: GPU %d: %s\n", d, cudaGetErrorString(e));
      return -1;
    }
    for (int p = 0; p < used; p++) {
      int can = 0;
      if (p == d)
        continue;
      if (cudaDeviceCanAccessPeer(&can, d, p) != cudaSuccess || !can) {
        fprintf(stderr, "planccl-refbench: GPU %d cannot access GPU %d as a peer\n", d, p);
        return -1;
      }
      e = cudaDeviceEnablePeerAccess(p, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        fprintf(stderr, "planccl-refbench: peer access %d -> %d: %s\n", d, p,
                cudaGetErrorString(e));
        return -1;
      }
      (void)cudaGetLastError();
    }
  }
  cudaSetDevice(0);
  return 0;
}

static void rb_print_header(const struct cudaDeviceProp *prop, int ngpus) {
  printf("# planccl-refbench: plan vs hand-written %s, %s x %d (%d SMs); %d calls per CUDA graph "
         "x %d replays, kernel time per call in us, max over ranks\n",
         g_o.coll->what, prop->name, ngpus, prop->multiProcessorCount, g_o.iters, g_o.reps);
  printf("# empty = empty kernel node, nop = plan of one nop per block, refnop = the reference "
         "moving 0 bytes (its flag protocol or syncs alone), emptypdl = the empty kernel launched "
         "with programmatic dependent launch, all in the reference's shape; ratio = plan / ref; "
         "GBs = algorithm bandwidth, bytes / time (GB/s)\n");
  printf("# planned kernels (plan, nop) launched %s\n",
         pcl_kernels_pdl() ? "with programmatic dependent launch (PLANCCL_PDL=1)"
                           : "plainly (PLANCCL_PDL=0)");
  if (g_o.blocks || g_o.threads)
    printf("# reference shape overridden (--blocks/--threads): where it differs from the plan's, "
           "the ratio compares different launch shapes\n");
  if (g_o.csv)
    printf("coll,ranks,bytes,plan_us,ref_us,ratio,plan_gbs,ref_gbs,empty_us,nop_us,refnop_us,"
           "emptypdl_us,"
           "plan_shape,ref_shape,check,plan\n");
  else
    printf("%5s %7s %9s %9s %7s %8s %8s %9s %9s %9s %9s %10s %10s %-14s %s\n", "ranks", "size",
           "plan_us", "ref_us", "ratio", "plan_GBs", "ref_GBs", "empty_us", "nop_us", "refnop_us",
           "emptypdl", "plan_shape", "ref_shape", "check", "plan");
  fflush(stdout);
}

/* One run (nranks rank threads) over every case, its rows printed into *sum; frees the plans. */
static void rb_run(int nranks, pcl_plan_t **plans, int np, int used, int sms, rb_summary_t *sum) {
  pcl_plan_t *nops[RB_MAX_CASES];
  int nnops = 0;
  rb_plan_run(nranks, used < nranks ? used : nranks, plans, np, nops, &nnops, sms);
  int ok = pcl_bootstrap_root_create(&g_run.handle) == ncclSuccess;
  rb_rank_t ranks[PCL_REF_MAX_RANKS];
  pthread_t th[PCL_REF_MAX_RANKS];
  int started = 0;
  memset(ranks, 0, sizeof(ranks));
  for (int r = 0; r < nranks; r++)
    for (int ci = 0; ci < g_run.ncases; ci++) {
      for (int q = 0; q < RB_KINDS; q++)
        g_run.res[r][ci].us[q] = -1;
      g_run.res[r][ci].bad[0] = g_run.res[r][ci].bad[1] = -1;
    }
  if (!ok) {
    fprintf(stderr, "planccl-refbench: bootstrap root failed\n");
    sum->errors++;
  }
  for (int r = 0; ok && r < nranks; r++) {
    ranks[r].run = &g_run;
    ranks[r].rank = r;
    ranks[r].dev = r % g_run.ngpus;
  }
  /* Each rank thread counts in every barrier: should one not start, the others are aborted
   * and the missing ones are counted in at teardown (the started ones then give up in the
   * bootstrap, which times out waiting for the missing ranks). */
  for (int r = 0; ok && r < nranks; r++) {
    if (pthread_create(&th[r], NULL, rb_rank_main, &ranks[r]) != 0) {
      fprintf(stderr, "planccl-refbench: cannot start rank thread %d\n", r);
      rb_abort(&g_run);
      __atomic_add_fetch(&g_run.down, (unsigned)(nranks - r), __ATOMIC_ACQ_REL);
      sum->errors++;
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++)
    pthread_join(th[r], NULL);
  if (ok)
    rb_report(sum);
  fflush(stdout);
  for (int q = 0; q < nnops; q++)
    pcl_plan_destroy(nops[q]);
  for (int q = 0; q < np; q++)
    pcl_plan_destroy(plans[q]);
}

int main(int argc, char **argv) {
  /* The bootstrap of threads of one process: loopback unless the caller chose an interface. Set
   * before any planccl call, since planccl reads its environment once. */
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 0);
  /* Up to 8 ranks on one GPU, each with its streams: more than CUDA's default 8 hardware queues,
   * and a kernel queued behind a spinning one that waits for it would hang (before any CUDA call).
   */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int prc = rb_parse_args(argc, argv);
  if (prc != 0) {
    usage();
    return prc > 0 ? 0 : 2;
  }
  /* Plans first: they need no GPU, so a bad --plan is reported on any machine. */
  pcl_plan_t *plans[RB_MAX_RUNS][4];
  int np[RB_MAX_RUNS];
  for (int k = 0; k < g_o.nruns; k++)
    if (rb_load_run_plans(g_o.ranks[k], plans[k], &np[k]) != 0)
      return 1;
  int ngpus = 0;
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess || ngpus == 0) {
    printf("planccl-refbench: no CUDA device (%s): skipped\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 77;
  }
  int maxr = 0;
  for (int k = 0; k < g_o.nruns; k++)
    if (g_o.ranks[k] > maxr)
      maxr = g_o.ranks[k];
  const int used = ngpus < maxr ? ngpus : maxr;
  if (rb_setup_devices(used) != 0)
    return 1;
  struct cudaDeviceProp prop;
  if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
    fprintf(stderr, "planccl-refbench: %s\n", cudaGetErrorString(e));
    return 1;
  }
  rb_print_header(&prop, ngpus);

  rb_summary_t sum;
  memset(&sum, 0, sizeof(sum));
  for (int k = 0; k < g_o.nruns; k++)
    rb_run(g_o.ranks[k], plans[k], np[k], used, prop.multiProcessorCount, &sum);
  int fail = sum.mismatches > 0 || sum.errors > 0;
  char at[48] = "-";
  if (sum.n > 0) {
    char size[32];
    rb_fmt_size(sum.max_bytes, size, sizeof(size));
    snprintf(at, sizeof(at), "%dranks/%s", sum.max_ranks, size);
  }
  printf("REFBENCH result=%s cases=%d max_ratio=%.3f at=%s geomean_ratio=%.3f mismatches=%ld "
         "errors=%d\n",
         fail ? "FAIL" : "ok", sum.n, sum.max_ratio, at, sum.n > 0 ? exp(sum.log_sum / sum.n) : 0.0,
         sum.mismatches, sum.errors);
  return fail ? 1 : 0;
}
