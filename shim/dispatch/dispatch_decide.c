/* SPDX-License-Identifier: MIT
 * The dispatch decision as a pure function (docs/architecture.md, "the path of one call", step 3):
 * a per-call config, disabled or forced -> NCCL; a plan for (collective, world, ranks per node,
 * in-place, bytes) that the kernels can run -> plan (the tuning file's choice where it has the
 * call's shape and size, else the untuned rules); else NCCL; with no real NCCL -> error. Every
 * input is a value all ranks share, so all ranks take the same path and packet flags stay in
 * lock-step. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "dispatch.h"

const char *pcl_coll_name(pcl_coll_t coll) {
  static const char *const names[PCL_COLL_COUNT] = {
      "AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
      "AlltoAll",  "Gather",    "Scatter", "Send",      "Recv"};
  return (unsigned)coll < PCL_COLL_COUNT ? names[coll] : "?";
}

const char *pcl_why_name(pcl_why_t why) {
  static const char *const names[PCL_WHY_COUNT] = {
      [PCL_WHY_PLAN] = "plan",
      [PCL_WHY_COUNT0] = "count 0 (no-op)",
      [PCL_WHY_NOT_PLANNED] = "collective not planned by planccl",
      [PCL_WHY_DISABLED] = "PLANCCL_DISABLE",
      [PCL_WHY_FORCED] = "PLANCCL_FORCE_FALLBACK",
      [PCL_WHY_PASSTHROUGH] = "pass-through communicator",
      [PCL_WHY_PREMULSUM] = "PreMulSum op",
      [PCL_WHY_NO_PLAN] = "no plan for this size",
      [PCL_WHY_DTYPE] = "kernels lack the dtype",
      [PCL_WHY_REDOP] = "kernels lack the reduction op",
      [PCL_WHY_EXEC] = "executor cannot run the plan",
      [PCL_WHY_SIZE_OVERFLOW] = "size overflows",
      [PCL_WHY_BARE_REAL] = "real NCCL handle",
      [PCL_WHY_ROOT] = "root out of range, or not a multiple of the plan's ranks per node",
      [PCL_WHY_PLAN_OP] = "the plan names another reduce_op",
      [PCL_WHY_PLACEMENT] = "in-place and out-of-place plans differ for non-roots",
      [PCL_WHY_TUNED_NCCL] = "tuning file chose NCCL",
      [PCL_WHY_CALL_CONFIG] = "per-call config",
  };
  return (unsigned)why < PCL_WHY_COUNT ? names[why] : "?";
}

/* The registry's collective for a planned NCCL collective; -1 for the others. */
static int plan_coll(pcl_coll_t coll) {
  switch (coll) {
  case PCL_COLL_ALLREDUCE:
    return PCL_PLAN_COLL_ALLREDUCE;
  case PCL_COLL_ALLGATHER:
    return PCL_PLAN_COLL_ALLGATHER;
  case PCL_COLL_REDUCESCATTER:
    return PCL_PLAN_COLL_REDUCESCATTER;
  case PCL_COLL_BROADCAST:
    return PCL_PLAN_COLL_BROADCAST;
  case PCL_COLL_REDUCE:
    return PCL_PLAN_COLL_REDUCE;
  default:
    return -1;
  }
}

static int has_op(pcl_coll_t coll) {
  return coll == PCL_COLL_ALLREDUCE || coll == PCL_COLL_REDUCE || coll == PCL_COLL_REDUCESCATTER;
}

uint64_t pcl_dispatch_msg_bytes(pcl_coll_t coll, size_t count, ncclDataType_t dtype, int nranks,
                                int *ok) {
  uint64_t es = pcl_dtype_bytes(dtype), bytes;
  *ok = 0;
  if (es == 0 || __builtin_mul_overflow((uint64_t)count, es, &bytes))
    return 0;
  /* allgather: total output; reducescatter: total input (executor/plan/plan.h). */
  if ((coll == PCL_COLL_ALLGATHER || coll == PCL_COLL_REDUCESCATTER) &&
      __builtin_mul_overflow(bytes, (uint64_t)(nranks > 0 ? nranks : 1), &bytes))
    return 0;
  *ok = 1;
  return bytes;
}

/* The registry's path for the call at this placement: a plan, or NULL (*tuned_nccl = 1 when the
 * tuning file chose NCCL). */
static const pcl_plan_t *select_plan(const struct pcl_dispatch_inputs *in, int pc, int inplace,
                                     uint64_t bytes, int *tuned_nccl) {
  const pcl_registry_call_t call = {.collective = (pcl_plan_coll_t)pc,
                                    .world = in->nranks,
                                    .ranks_per_node = in->ranks_per_node,
                                    .ranks_per_gpu = in->ranks_per_gpu,
                                    .procs = in->procs,
                                    .inplace = inplace,
                                    .registered = in->registered,
                                    .bytes = bytes,
                                    .untuned = in->untuned};
  int tuned = 0;
  const pcl_plan_t *plan = pcl_registry_select_call(in->registry, &call, &tuned);
  *tuned_nccl = tuned && plan == NULL;
  return plan;
}

/* Broadcast and reduce: only the root's in-place view is the call's (a non-root's sendbuff may
 * be NULL or anything), so ranks may ask the registry with different placements. The plan one
 * placement gets is safe only if the other placement gets the same plan or one whose non-root
 * programs are alike; both lookups are made alike on every rank, so every rank refuses alike. */
static int placement_safe(const struct pcl_dispatch_inputs *in, int pc, uint64_t bytes,
                          const pcl_plan_t *plan) {
  if (in->coll != PCL_COLL_BROADCAST && in->coll != PCL_COLL_REDUCE)
    return 1;
  int tuned_nccl;
  const pcl_plan_t *other = select_plan(in, pc, !in->inplace, bytes, &tuned_nccl);
  return (plan == NULL && other == NULL) || pcl_plan_nonroot_alike(plan, other);
}

static void set(struct pcl_dispatch_decision *d, pcl_path_t path, pcl_why_t why) {
  d->path = path;
  d->why = why;
}

void pcl_dispatch_decide(const struct pcl_dispatch_inputs *in, struct pcl_dispatch_decision *d) {
  memset(d, 0, sizeof(*d));
  int pc = plan_coll(in->coll);
  if (in->call_config) {
    /* Before count 0: what the config asks of even an empty call is the real NCCL's to say. */
    set(d, in->have_real ? PCL_PATH_NCCL : PCL_PATH_ERROR, PCL_WHY_CALL_CONFIG);
    return;
  }
  if (pc >= 0 && in->count == 0) { /* NCCL drops count-0 collectives (send/recv are kept) */
    set(d, PCL_PATH_NOOP, PCL_WHY_COUNT0);
    return;
  }
  if (pc < 0)
    set(d, PCL_PATH_NCCL, PCL_WHY_NOT_PLANNED);
  else if (in->disabled)
    set(d, PCL_PATH_NCCL, PCL_WHY_DISABLED);
  else if (in->force_mask & PCL_COLL_BIT(in->coll))
    set(d, PCL_PATH_NCCL, PCL_WHY_FORCED);
  else if (!in->planccl_ok)
    set(d, PCL_PATH_NCCL, PCL_WHY_PASSTHROUGH);
  else if (has_op(in->coll) && (int)in->op >= (int)ncclNumOps)
    set(d, PCL_PATH_NCCL, PCL_WHY_PREMULSUM);
  else {
    int ok;
    d->msg_bytes = pcl_dispatch_msg_bytes(in->coll, in->count, in->dtype, in->nranks, &ok);
    int tuned_nccl = 0;
    const pcl_plan_t *plan =
        ok ? select_plan(in, pc, in->inplace, d->msg_bytes, &tuned_nccl) : NULL;
    d->plan = plan;
    unsigned dt = (unsigned)in->dtype;
    if (!ok)
      set(d, PCL_PATH_NCCL, PCL_WHY_SIZE_OVERFLOW);
    else if (!placement_safe(in, pc, d->msg_bytes, plan))
      set(d, PCL_PATH_NCCL, PCL_WHY_PLACEMENT);
    else if (plan == NULL)
      set(d, PCL_PATH_NCCL, tuned_nccl ? PCL_WHY_TUNED_NCCL : PCL_WHY_NO_PLAN);
    else if (pcl_plan_root_shift(plan, in->root) < 0) /* plans are for root 0: relabelled */
      set(d, PCL_PATH_NCCL, PCL_WHY_ROOT);
    else if (in->caps == NULL || dt >= ncclNumTypes || !(in->caps->dtypes & (1u << dt)))
      set(d, PCL_PATH_NCCL, PCL_WHY_DTYPE);
    else if (has_op(in->coll) && !(in->caps->redops[dt] & (1u << (unsigned)in->op)))
      set(d, PCL_PATH_NCCL, PCL_WHY_REDOP);
    else if (has_op(in->coll) && !pcl_plan_accepts_op(plan, (int)in->op))
      set(d, PCL_PATH_NCCL, PCL_WHY_PLAN_OP);
    else if (pcl_plan_buffer_bytes(plan, d->msg_bytes, &d->in_bytes, &d->out_bytes) != 0)
      set(d, PCL_PATH_NCCL, PCL_WHY_NO_PLAN);
    else
      set(d, PCL_PATH_PLAN, PCL_WHY_PLAN);
  }
  if (d->path == PCL_PATH_NCCL && !in->have_real)
    d->path = PCL_PATH_ERROR;
}

int pcl_dispatch_registration_matters(const struct pcl_dispatch_inputs *in) {
  /* The dispatcher looks a call's registration up (a window view, an exchange of a
   * ncclCommRegister'ed pair, a vote for automatic registration) only where this says 1, and the
   * exchange and the vote are collective: every input is shared by all ranks, so all ranks give
   * the same verdict and take part alike. Calls whose tuned registered entry differs from the
   * unregistered one pay that too: the tuning file measured that registration changes their
   * path. */
  struct pcl_dispatch_inputs x = *in;
  struct pcl_dispatch_decision u, r;
  x.registered = 0;
  pcl_dispatch_decide(&x, &u);
  x.registered = 1;
  pcl_dispatch_decide(&x, &r);
  if (r.path == PCL_PATH_PLAN && r.plan->needs_userbuf)
    return 1;
  /* The reason alone only labels the statistics: forwarded either way, nothing to register. */
  return r.path != u.path || (r.path == PCL_PATH_PLAN && r.plan != u.plan);
}

static const struct {
  const char *name;
  pcl_coll_t coll;
} fallback_names[] = {
    {"allreduce", PCL_COLL_ALLREDUCE}, {"broadcast", PCL_COLL_BROADCAST},
    {"bcast", PCL_COLL_BROADCAST},     {"reduce", PCL_COLL_REDUCE},
    {"allgather", PCL_COLL_ALLGATHER}, {"reducescatter", PCL_COLL_REDUCESCATTER},
    {"alltoall", PCL_COLL_ALLTOALL},   {"gather", PCL_COLL_GATHER},
    {"scatter", PCL_COLL_SCATTER},     {"send", PCL_COLL_SEND},
    {"recv", PCL_COLL_RECV},
};

uint32_t pcl_dispatch_parse_fallback(const char *list, char *bad, size_t badlen) {
  uint32_t mask = 0;
  if (bad != NULL && badlen > 0)
    bad[0] = '\0';
  if (list == NULL)
    return 0;
  const char *p = list;
  while (*p) {
    char word[32];
    size_t n = 0;
    while (*p == ',' || isspace((unsigned char)*p))
      p++;
    while (*p && *p != ',' && !isspace((unsigned char)*p)) {
      /* "all_reduce", "AllReduce", "all-reduce" all name the same collective. */
      if (*p != '_' && *p != '-' && n + 1 < sizeof(word))
        word[n++] = (char)tolower((unsigned char)*p);
      p++;
    }
    word[n] = '\0';
    if (n == 0)
      continue;
    if (strcmp(word, "all") == 0) {
      mask |= PCL_COLL_ALL_BITS;
      continue;
    }
    int found = 0;
    for (size_t i = 0; i < sizeof(fallback_names) / sizeof(fallback_names[0]); i++)
      if (strcmp(word, fallback_names[i].name) == 0) {
        mask |= PCL_COLL_BIT(fallback_names[i].coll);
        found = 1;
      }
    if (!found && bad != NULL && badlen > 0 && bad[0] == '\0')
      snprintf(bad, badlen, "%s", word);
  }
  return mask;
}
