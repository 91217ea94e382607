/* SPDX-License-Identifier: MIT
 * Plan loader helpers without yajl: the "file: json.path: reason" error context and the name
 * tables (collectives, ops incl. v0.7 mnemonics, channel/buffer types, reductions). */
#include <stdio.h>
#include <string.h>

#include "plan_int.h"

/* ---- Error context ---------------------------------------------------------------------- */

size_t pcl_plan_path_key(pcl_plan_ctx_t *c, const char *key) {
  size_t old = c->path_len;
  int n = snprintf(c->path + old, sizeof(c->path) - old, "%s%s", old ? "." : "", key);
  if (n > 0)
    c->path_len = old + (size_t)n < sizeof(c->path) ? old + (size_t)n : sizeof(c->path) - 1;
  return old;
}

size_t pcl_plan_path_idx(pcl_plan_ctx_t *c, int idx) {
  size_t old = c->path_len;
  int n = snprintf(c->path + old, sizeof(c->path) - old, "[%d]", idx);
  if (n > 0)
    c->path_len = old + (size_t)n < sizeof(c->path) ? old + (size_t)n : sizeof(c->path) - 1;
  return old;
}

void pcl_plan_path_pop(pcl_plan_ctx_t *c, size_t len) {
  c->path_len = len;
  c->path[len] = '\0';
}

ncclResult_t pcl_plan_fail(pcl_plan_ctx_t *c, const char *suffix, const char *fmt, ...) {
  if (c->failed)
    return ncclInvalidArgument;
  c->failed = 1;
  if (c->err == NULL || c->errlen == 0)
    return ncclInvalidArgument;
  char reason[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  const char *path = c->path_len ? c->path : "";
  const char *dot = (c->path_len && suffix) ? "." : "";
  snprintf(c->err, c->errlen, "%s: %s%s%s: %s", c->file, path, dot, suffix ? suffix : "", reason);
  if (!c->path_len && !suffix)
    snprintf(c->err, c->errlen, "%s: (root): %s", c->file, reason);
  return ncclInvalidArgument;
}

/* ---- Names ------------------------------------------------------------------------------ */

static const char *const coll_names[PCL_PLAN_COLL_COUNT] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall",  "sendrecv",  "test",          "custom"};

const pcl_plan_opinfo_t pcl_plan_ops[PCL_PLAN_OP_COUNT] = {
#define PCL_OP(id, nm, kernel, fl, ch, ids_, smin, smax, dmin, dmax, spkt, dpkt)                   \
  [PCL_PLAN_OP_##id] = {.name = nm,                                                                \
                        .flags = fl,                                                               \
                        .chans = ch,                                                               \
                        .ids = ids_,                                                               \
                        .src_pkt = spkt,                                                           \
                        .dst_pkt = dpkt,                                                           \
                        .src_min = smin,                                                           \
                        .src_max = smax,                                                           \
                        .dst_min = dmin,                                                           \
                        .dst_max = dmax},
#include "ops.def"
#undef PCL_OP
};

/* v0.7 names that no longer exist, and what they mean now. */
static const struct {
  const char *old;
  pcl_plan_op_type_t now;
} legacy_ops[] = {{"rrc", PCL_PLAN_OP_RRE},    {"rrcs", PCL_PLAN_OP_RRES},
                  {"rs", PCL_PLAN_OP_RES},     {"rspkt", PCL_PLAN_OP_RESPKT},
                  {"rpkt", PCL_PLAN_OP_REPKT}, {"tpkt", PCL_PLAN_OP_CPKT}};

const char *pcl_plan_coll_name(pcl_plan_coll_t c) {
  return (unsigned)c < PCL_PLAN_COLL_COUNT ? coll_names[c] : "unknown";
}

int pcl_plan_coll_from_name(const char *s) {
  for (int i = 0; s && i < PCL_PLAN_COLL_COUNT; i++)
    if (strcmp(coll_names[i], s) == 0)
      return i;
  return -1;
}

const char *pcl_plan_op_name(pcl_plan_op_type_t t) {
  return (unsigned)t < PCL_PLAN_OP_COUNT ? pcl_plan_ops[t].name : "unknown";
}

const char *pcl_plan_chan_name(int t) {
  switch (t) {
  case PCL_PLAN_CHAN_MEMORY:
    return "memory";
  case PCL_PLAN_CHAN_PORT:
    return "port";
  case PCL_PLAN_CHAN_SWITCH:
    return "switch";
  default:
    return "none";
  }
}

const char *pcl_plan_buf_name(int t) {
  switch (t) {
  case PCL_PLAN_BUF_INPUT:
    return "input";
  case PCL_PLAN_BUF_OUTPUT:
    return "output";
  case PCL_PLAN_BUF_SCRATCH:
    return "scratch";
  default:
    return "none";
  }
}

int pcl_plan_chan_from_name(const char *s, int *legacy) {
  if (strcmp(s, "memory") == 0)
    return PCL_PLAN_CHAN_MEMORY;
  if (strcmp(s, "port") == 0)
    return PCL_PLAN_CHAN_PORT;
  if (strcmp(s, "switch") == 0)
    return PCL_PLAN_CHAN_SWITCH;
  if (strcmp(s, "none") == 0)
    return PCL_PLAN_CHAN_NONE;
  if (legacy)
    *legacy = 1;
  if (strcmp(s, "sm") == 0)
    return PCL_PLAN_CHAN_MEMORY;
  if (strcmp(s, "proxy") == 0)
    return PCL_PLAN_CHAN_PORT;
  if (strcmp(s, "nvls") == 0)
    return PCL_PLAN_CHAN_SWITCH;
  return -1;
}

int pcl_plan_buf_from_name(const char *s) {
  if (strcmp(s, "i") == 0)
    return PCL_PLAN_BUF_INPUT;
  if (strcmp(s, "o") == 0)
    return PCL_PLAN_BUF_OUTPUT;
  if (strcmp(s, "s") == 0)
    return PCL_PLAN_BUF_SCRATCH;
  return -1;
}

int pcl_plan_op_from_name(const char *s, int legacy) {
  if (legacy && strcmp(s, "cpkt") == 0)
    return PCL_PLAN_OP_UPKT;
  for (int i = 0; i < PCL_PLAN_OP_COUNT; i++)
    if (strcmp(pcl_plan_ops[i].name, s) == 0)
      return i;
  for (size_t i = 0; i < sizeof(legacy_ops) / sizeof(legacy_ops[0]); i++)
    if (strcmp(legacy_ops[i].old, s) == 0)
      return legacy_ops[i].now;
  return -1;
}

int pcl_plan_red_from_name(const char *s) {
  static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
  for (int i = 0; i < 5; i++)
    if (strcmp(n[i], s) == 0)
      return i;
  return -1;
}

/* Is this a v0.7-only op or channel name? */
int pcl_plan_name_is_legacy(const char *s) {
  for (size_t i = 0; i < sizeof(legacy_ops) / sizeof(legacy_ops[0]); i++)
    if (strcmp(legacy_ops[i].old, s) == 0)
      return 1;
  return strcmp(s, "sm") == 0 || strcmp(s, "proxy") == 0 || strcmp(s, "nvls") == 0;
}
