/* SPDX-License-Identifier: MIT
 * Private to the plan loader: the error context that builds "file: json.path: reason" messages,
 * shared by the JSON reader (plan_json.c) and the semantic validator (plan_validate.c). */
#ifndef PCL_PLAN_INT_H
#define PCL_PLAN_INT_H

#include <stdarg.h>
#include "pcl_check.h"
#include "plan.h"

#define PCL_PLAN_PATH_MAX 256

typedef struct {
  const char *file; /* name used in messages */
  char *err;        /* caller's buffer (may be NULL) */
  size_t errlen;
  int failed;                   /* set by the first error; later errors are ignored */
  char path[PCL_PLAN_PATH_MAX]; /* current JSON path, e.g. "gpus[1].threadblocks[0]" */
  size_t path_len;
} pcl_plan_ctx_t;

/* Path stack: push returns the previous length so callers can pop back to it. */
size_t pcl_plan_path_key(pcl_plan_ctx_t *c, const char *key);
size_t pcl_plan_path_idx(pcl_plan_ctx_t *c, int idx);
void pcl_plan_path_pop(pcl_plan_ctx_t *c, size_t len);

/* Records "file: path: reason" (path = current path; suffix appended when non-NULL, e.g. a key
 * that was not pushed) and returns ncclInvalidArgument. Only the first error is kept. */
ncclResult_t pcl_plan_fail(pcl_plan_ctx_t *c, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Name lookups (-1 when unknown). chan: also maps v0.7 sm/proxy/nvls and sets *legacy when
 * non-NULL; op: with legacy=1 "cpkt" is the old copy-out-of-packets (UPKT). */
int pcl_plan_chan_from_name(const char *s, int *legacy);
int pcl_plan_buf_from_name(const char *s);
int pcl_plan_op_from_name(const char *s, int legacy);
int pcl_plan_red_from_name(const char *s);
int pcl_plan_name_is_legacy(const char *s);

/* Semantic validation of a fully converted plan (everything structural is already checked).
 * Also fills the derived fields (channel peer_channel). */
ncclResult_t pcl_plan_validate(pcl_plan_t *plan, pcl_plan_ctx_t *c);

/* Op classification used by the validator and the layout helpers. */
int pcl_plan_op_is_packet(int op_type); /* uses packets in scratch (needs LL) */
int pcl_plan_op_is_reduce(int op_type); /* carries a reduction */
int pcl_plan_op_is_nvls(int op_type);

/* plan_nodes.c: infers nranks_per_node when the plan omits it, and refuses a memory channel
 * between nodes. Runs after conversion (channels known), before the other checks. */
ncclResult_t pcl_plan_check_nodes(pcl_plan_t *p, pcl_plan_ctx_t *c);

/* Greatest common divisor (plan rates in the validator, size steps in the simulator). */
static inline uint64_t pcl_plan_gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

#endif
