/* SPDX-License-Identifier: MIT
 * The dispatcher: every collective and point-to-point call goes through pcl_dispatch, which looks
 * the decision up in the comm's set-associative cache (pcl_dispatch_decide on a miss, plus the
 * executor's pcl_exec_supported), counts it, and then launches the plan (or queues it inside a
 * group), forwards to the real NCCL, or fails. The hit path takes no lock, allocates nothing and
 * touches no file. */
#include <pthread.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "comm_int.h"
#include "exec.h"
#include "log.h"
#include "pcl_check.h"
#include "param.h"
#include "portchan.h"
#include "shim_int.h"

static pthread_once_t params_once = PTHREAD_ONCE_INIT;
static int disabled;
static uint32_t force_mask;

static void read_params(void) {
  char bad[32];
  disabled = (int)pcl_param_disable();
  force_mask = pcl_dispatch_parse_fallback(pcl_param_force_fallback(), bad, sizeof(bad));
  if (bad[0] != '\0')
    PCL_WARN(PCL_LOG_SHIM | PCL_LOG_ENV,
             "PLANCCL_FORCE_FALLBACK: unknown collective '%s' ignored "
             "(names: all, allreduce, allgather, reducescatter, broadcast, reduce)",
             bad);
}

/* NCCL's in-place rules (pointer equality, offset by rank for gather/scatter-like calls). */
static int is_inplace(const struct pcl_coll_args *a, int rank) {
  size_t es = pcl_dtype_bytes(a->dtype);
  const char *s = a->sendbuff, *r = a->recvbuff;
  switch (a->coll) {
  case PCL_COLL_ALLGATHER:
    return rank >= 0 && s == r + (size_t)rank * a->count * es;
  case PCL_COLL_REDUCESCATTER:
    return rank >= 0 && r == s + (size_t)rank * a->count * es;
  default:
    return s == r;
  }
}

static int have_real(const struct pcl_coll_args *a) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return 0;
  if (a->config != NULL)
    return 1; /* forward() refuses a missing *Config function itself, with its own WARN */
  switch (a->coll) {
  case PCL_COLL_ALLREDUCE:
    return F->ncclAllReduce != NULL;
  case PCL_COLL_BROADCAST:
    return F->ncclBroadcast != NULL && F->ncclBcast != NULL;
  case PCL_COLL_REDUCE:
    return F->ncclReduce != NULL;
  case PCL_COLL_ALLGATHER:
    return F->ncclAllGather != NULL;
  case PCL_COLL_REDUCESCATTER:
    return F->ncclReduceScatter != NULL;
  default:
    return 1; /* forward() reports the missing symbol itself */
  }
}

static void exec_args(const struct pcl_coll_args *a, const struct pcl_dispatch_decision *d,
                      pcl_exec_args_t *x) {
  x->in = a->sendbuff;
  x->out = a->recvbuff;
  x->in_bytes = d->in_bytes;
  x->out_bytes = d->out_bytes;
  x->dtype = a->dtype;
  x->op = a->op;
  x->root = a->root;
  x->force_ll8 = 0;
  /* Only a plan that reaches user buffers gets the registration. Any other plan a registered call
   * takes (its tuned registered entry named it) runs the program it runs unregistered: segmented
   * where its scratch falls short, and on window views too when it uses port channels, neither of
   * which the executor allows a program bound to a registration. */
  x->ub = d->plan != NULL && d->plan->needs_userbuf ? a->ub : NULL;
}

/* The buffers' extents of a planned collective (NCCL's meaning of count), and where NCCL places a
 * rank's buffer by rank: in-place allgather's input, in-place reduce-scatter's output (step =
 * its size). 0 for the other collectives and sizes that overflow. */
struct extents {
  uint64_t in, out, in_step, out_step;
};

static int call_extents(const struct ncclComm *c, const struct pcl_coll_args *a, int inplace,
                        struct extents *x) {
  const uint64_t n = (uint64_t)c->pcl->nranks, es = pcl_dtype_bytes(a->dtype);
  if (es == 0 || a->count == 0 || a->count > UINT64_MAX / es / n)
    return 0;
  x->in = x->out = (uint64_t)a->count * es;
  x->in_step = x->out_step = 0;
  switch (a->coll) {
  case PCL_COLL_ALLREDUCE:
  case PCL_COLL_BROADCAST:
  case PCL_COLL_REDUCE:
    return 1;
  case PCL_COLL_ALLGATHER:
    x->out = x->in * n;
    x->in_step = inplace ? x->in : 0;
    return 1;
  case PCL_COLL_REDUCESCATTER:
    x->in = x->out * n;
    x->out_step = inplace ? x->out : 0;
    return 1;
  default:
    return 0;
  }
}

/* The decision for a call, registered or not (pure; the same on every rank). */
static void decide(struct ncclComm *c, const struct pcl_coll_args *a, int inplace, int registered,
                   struct pcl_dispatch_inputs *in, struct pcl_dispatch_decision *d) {
  struct pcl_comm_pcl *p = c->pcl;
  *in = (struct pcl_dispatch_inputs){.coll = a->coll,
                                     .count = a->count,
                                     .dtype = a->dtype,
                                     .op = a->op,
                                     .inplace = inplace,
                                     .root = a->root,
                                     .registered = registered,
                                     .call_config = a->config != NULL,
                                     .nranks = p ? p->nranks : c->nranks,
                                     .ranks_per_node = p ? p->ranks_per_node : 0,
                                     .ranks_per_gpu = p ? p->ranks_per_gpu : 1,
                                     .procs = p ? p->procs : 0,
                                     .untuned = p ? !p->tuned : 0,
                                     .planccl_ok = p != NULL,
                                     .disabled = disabled,
                                     .force_mask = force_mask,
                                     .have_real = have_real(a),
                                     .registry = p ? p->reg : NULL,
                                     .caps = p ? &p->caps : NULL};
  pcl_dispatch_decide(in, d);
}

/* The registration of a call that registered buffers would run otherwise (a zero-copy plan, or a
 * tuning entry for registered buffers that chose otherwise): a view of symmetric windows, or the
 * pair of ncclCommRegister'ed buffers, exchanged at its first such call. The exchange is
 * collective: every rank reaches the same verdict from values all ranks share
 * (pcl_dispatch_registration_matters, pcl_dcache_entry.reg_matters), and none runs inside a group
 * (one thread may drive several ranks) or a stream capture (a capture uses what was exchanged
 * before it). With automatic registration on, every call of its sizes then takes part in a vote
 * (comm_auto.c) that decides, alike on every rank, which registration the call runs with, if
 * any. */
static ncclResult_t registration(struct ncclComm *c, const struct pcl_coll_args *a, int inplace,
                                 uint64_t msg_bytes, struct pcl_exec_userbuf **out) {
  struct pcl_comm_pcl *p = c->pcl;
  struct extents x;
  *out = NULL;
  if (!call_extents(c, a, inplace, &x))
    return ncclSuccess;
  struct pcl_exec_userbuf *ub =
      p->wins != NULL ? pcl_comm_win_view(p, a, x.in, x.out, x.in_step, x.out_step) : NULL;
  int candidate = 0;
  const int grouped = pcl_group_depth() > 0;
  enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (ub == NULL && p->regs != NULL &&
      (ub = pcl_comm_reg_find(p, a, x.in, x.out, &candidate)) == NULL && candidate && !grouped &&
      cudaStreamIsCapturing(a->stream, &cap) == cudaSuccess && cap == cudaStreamCaptureStatusNone)
    ub = pcl_comm_reg_exchange(p, a, x.in, x.out);
  *out = ub;
  if (!pcl_comm_auto_applies(p, msg_bytes))
    return ncclSuccess;
  const int can = !grouped && cudaStreamIsCapturing(a->stream, &cap) == cudaSuccess &&
                  cap == cudaStreamCaptureStatusNone;
  return pcl_comm_auto_agree(p, &c->abort_flag, a, x.in, x.out, can, out);
}

/* Cache miss: decide, ask the executor, remember. */
static void fill(struct ncclComm *c, const struct pcl_coll_args *a, int inplace,
                 struct pcl_dcache_entry *e, uint32_t tag, uint64_t key) {
  struct pcl_comm_pcl *p = c->pcl;
  struct pcl_dispatch_inputs in;
  struct pcl_dispatch_decision d;
  decide(c, a, inplace, a->ub != NULL, &in, &d);
  if (d.path == PCL_PATH_PLAN) {
    pcl_exec_args_t x;
    exec_args(a, &d, &x);
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != p->cuda_dev)
      cudaSetDevice(p->cuda_dev);
    /* Deterministic on every rank for the same (plan, sizes, dtype, op); builds the program of a
     * new shape now, so later calls and group flushes only launch. */
    int ok = pcl_exec_supported(p->exec, d.plan, &x);
    if (prev != p->cuda_dev && prev >= 0)
      cudaSetDevice(prev);
    if (!ok) {
      d.path = in.have_real ? PCL_PATH_NCCL : PCL_PATH_ERROR;
      d.why = PCL_WHY_EXEC;
    }
  }
  if (d.msg_bytes == 0) {
    int ok;
    d.msg_bytes = pcl_dispatch_msg_bytes(a->coll, a->count, a->dtype, in.nranks, &ok);
  }
  /* Registered entries never lead to another lookup: only unregistered ones need the verdict. */
  e->reg_matters = a->ub == NULL && p != NULL && pcl_dispatch_registration_matters(&in);
  /* The path logged for a size class is the first call's (planccl-bench reports it): where
   * registration matters, the dispatcher logs the decision the call runs, once it knows it. */
  if (!e->reg_matters)
    pcl_stats_log_path(c, a, inplace, &d);
  e->d = d;
  e->stat_slot = pcl_stats_slot(c->stats, &d);
  e->bytes_key = key;
  e->tag = tag;
}

/* The cached decision of (tag, key), filled on a miss. The entry is valid until the next lookup
 * on this communicator (entries move within their set). */
static struct pcl_dcache_entry *lookup(struct ncclComm *c, const struct pcl_coll_args *a,
                                       int inplace, uint32_t tag, uint64_t key) {
  uint64_t h = (key * 0x9e3779b97f4a7c15ull) ^ tag;
  struct pcl_dcache_entry *set = c->dcache[(h ^ (h >> 29)) & (PCL_DCACHE_SETS - 1)];
  if (set[0].tag == tag && set[0].bytes_key == key)
    return &set[0];
  int w = 1;
  while (w < PCL_DCACHE_WAYS && !(set[w].tag == tag && set[w].bytes_key == key))
    w++;
  const int hit = w < PCL_DCACHE_WAYS;
  struct pcl_dcache_entry e;
  if (hit)
    e = set[w];
  else
    w = PCL_DCACHE_WAYS - 1; /* the least recently used way goes */
  memmove(&set[1], &set[0], (size_t)w * sizeof(*set));
  if (hit)
    set[0] = e;
  else
    fill(c, a, inplace, &set[0], tag, key);
  return &set[0];
}

/* After a kernel gave up (timeout, abort, a failed port push) the ranks' flags and semaphores no
 * longer agree, so a later planned call could only hang or compute garbage: it is refused with
 * the communicator's error, WARNed once; forwarded calls still reach the real NCCL. */
static ncclResult_t refuse_after_kernel_error(struct ncclComm *c, struct pcl_comm_pcl *p) {
  uint32_t kerr = 0;
  ncclResult_t res = ncclSuccess;
  if (p->portchan != NULL && (res = pcl_portchan_error(p->portchan)) != ncclSuccess) {
    /* A failed port channel aborts the kernels (comm_res.c); no later call could finish. */
    if (!__atomic_exchange_n(&p->kernel_error_logged, 1, __ATOMIC_RELAXED))
      PCL_WARN(PCL_LOG_SHIM,
               "communicator %p (rank %d of %d): its port channels failed; planned calls on it "
               "are refused from now on (%s): abort the communicator (ncclCommAbort)",
               (void *)c, p->rank, p->nranks, ncclGetErrorString(res));
    return res;
  }
  res = pcl_exec_async_error(p->exec, &kerr);
  if (res == ncclSuccess)
    return ncclSuccess;
  if (!__atomic_exchange_n(&p->kernel_error_logged, 1, __ATOMIC_RELAXED))
    PCL_WARN(PCL_LOG_SHIM,
             "communicator %p (rank %d of %d): a planccl kernel gave up (%s); planned calls on "
             "it are refused from now on (%s): abort the communicator (ncclCommAbort)",
             (void *)c, p->rank, p->nranks,
             kerr == PCL_KERR_TIMEOUT  ? "PLANCCL_TIMEOUT_S expired"
             : kerr == PCL_KERR_ABORT  ? "aborted"
             : kerr == PCL_KERR_LAUNCH ? "a launch failed on this rank"
                                       : "a port-channel push failed",
             ncclGetErrorString(res));
  return res;
}

ncclResult_t pcl_dispatch_launch(const struct pcl_coll_args *a,
                                 const struct pcl_dispatch_decision *d) {
  struct pcl_comm_pcl *p = a->comm->pcl;
  PCL_CHECK(refuse_after_kernel_error(a->comm, p));
  pcl_exec_args_t x;
  exec_args(a, d, &x);
  /* The comm's device is current during the launch (one thread may drive several GPUs). */
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != p->cuda_dev)
    cudaSetDevice(p->cuda_dev);
  ncclResult_t res = pcl_exec_launch(p->exec, d->plan, &x, a->stream);
  if (res == ncclSuccess && a->ub != NULL && p->autoreg != NULL)
    pcl_comm_auto_launched(p, a->ub, a->stream);
  if (prev != p->cuda_dev && prev >= 0)
    cudaSetDevice(prev);
  return res;
}

/* Carries out a counted decision. */
static ncclResult_t carry_out(struct ncclComm *c, const struct pcl_coll_args *a,
                              const struct pcl_dispatch_decision *d) {
  switch (d->path) {
  case PCL_PATH_NOOP:
    return ncclSuccess;
  case PCL_PATH_PLAN:
    if (pcl_group_depth() > 0)
      return pcl_group_enqueue(a, d);
    return pcl_dispatch_launch(a, d);
  case PCL_PATH_NCCL:
    if (pcl_group_depth() > 0)
      PCL_CHECK(pcl_group_note_forward(a));
    return pcl_dispatch_forward(a);
  default:
    PCL_WARN(PCL_LOG_SHIM,
             "nccl%s: %zu elements of dtype %d (op %d) on %d ranks: no plan can run "
             "it (%s) and no real NCCL is loaded to run it instead; set PLANCCL_NCCL_LIB",
             pcl_coll_name(a->coll), a->count, (int)a->dtype, (int)a->op, c->nranks,
             pcl_why_name(d->why));
    return ncclInvalidUsage;
  }
}

/* A call with a per-call config (config != NULL): planccl cannot honour it, so it is forwarded,
 * and counted under its own reason. It bypasses the decision cache, whose key has no room for the
 * config's presence and which it would only fill with entries that need no lookup. */
static ncclResult_t dispatch_config(struct ncclComm *c, const struct pcl_coll_args *a,
                                    int inplace) {
  struct pcl_dispatch_inputs in;
  struct pcl_dispatch_decision d;
  int ok;
  decide(c, a, inplace, 0, &in, &d);
  d.msg_bytes = pcl_dispatch_msg_bytes(a->coll, a->count, a->dtype, in.nranks, &ok);
  pcl_stats_add(c->stats, a->coll, pcl_stats_slot(c->stats, &d), d.msg_bytes);
  return carry_out(c, a, &d);
}

ncclResult_t pcl_dispatch(const struct pcl_coll_args *a) {
  struct ncclComm *c = a->comm;
  if (c == NULL)
    return pcl_dispatch_forward(a); /* the real library calling itself */
  pthread_once(&params_once, read_params);
  if (pcl_setup_state(c) != PCL_SETUP_DONE) {
    /* Setup still running (non-blocking init polled too early) or deferred: the real NCCL
     * decides whether the call is legal. */
    if (pcl_group_depth() > 0)
      PCL_CHECK(pcl_group_note_forward(a));
    return pcl_dispatch_forward(a);
  }
  int inplace = is_inplace(a, c->rank);
  if (a->config != NULL)
    return dispatch_config(c, a, inplace);
  uint32_t tag = 1u | (uint32_t)a->coll << 1 | (uint32_t)inplace << 5 |
                 ((uint32_t)a->dtype & 31u) << 6 | ((uint32_t)a->op & 0x1fffffu) << 11;
  /* The root only matters to broadcast/reduce: fold it into the count key for them. */
  uint64_t key = a->count;
  if (a->coll == PCL_COLL_BROADCAST || a->coll == PCL_COLL_REDUCE)
    key ^= (uint64_t)(uint32_t)a->root << 48;
  struct pcl_dcache_entry *e = lookup(c, a, inplace, tag, key);
  struct pcl_coll_args with_ub;
  struct pcl_exec_userbuf *ub = NULL;
  if (e->reg_matters) {
    if (c->pcl->wins != NULL || c->pcl->regs != NULL || c->pcl->autoreg != NULL)
      PCL_CHECK(registration(c, a, inplace, e->d.msg_bytes, &ub));
    if (ub == NULL) /* runs unregistered: logged here rather than by fill() */
      pcl_stats_log_path(c, a, inplace, &e->d);
  }
  if (ub != NULL) {
    with_ub = *a;
    with_ub.ub = ub;
    a = &with_ub;
    /* Registered calls decide apart (zero-copy plans, the tuning file's registered entries),
     * views and exact registrations apart again (a zero-copy plan over port channels runs on the
     * latter only). */
    e = lookup(c, a, inplace, tag, key ^ 1ull << 63 ^ (uint64_t)pcl_exec_userbuf_is_view(ub) << 62);
  }
  pcl_stats_add(c->stats, a->coll, e->stat_slot, e->d.msg_bytes);
  return carry_out(c, a, &e->d);
}
