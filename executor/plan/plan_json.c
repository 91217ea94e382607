/* SPDX-License-Identifier: MIT
 * The plan loader: reads an MSCCL++ executor JSON plan with yajl (the only yajl user in planccl),
 * converts it into the immutable pcl_plan_t structs (plan_json_gpu.c, plan_json_ops.c), checking
 * every field's type, range and reference on the way, then hands the result to the semantic
 * validator (plan_validate.c). This file: the top level, loading and freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "plan_json_int.h"

#define MAX_JSON_DEPTH 64
#define MAX_FILE_BYTES (64u << 20)

/* Pre-scan: does the plan use any v0.7-only op or channel name? Tolerates malformed input (the
 * real conversion reports it). */
static int scan_legacy_ops(yajl_val ops, int depth) {
  if (!YAJL_IS_ARRAY(ops) || depth > 2)
    return 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    yajl_val op = ops->u.array.values[i];
    yajl_val n = pcl_json_get(op, "name"), ct = pcl_json_get(op, "channel_type");
    if (YAJL_IS_STRING(n) && pcl_plan_name_is_legacy(YAJL_GET_STRING(n)))
      return 1;
    if (YAJL_IS_STRING(ct) && pcl_plan_name_is_legacy(YAJL_GET_STRING(ct)))
      return 1;
    if (scan_legacy_ops(pcl_json_get(op, "ops"), depth + 1))
      return 1;
  }
  return 0;
}

static int scan_legacy(yajl_val root) {
  yajl_val gpus = pcl_json_get(root, "gpus");
  if (!YAJL_IS_ARRAY(gpus))
    return 0;
  for (size_t g = 0; g < gpus->u.array.len; g++) {
    yajl_val tbs = pcl_json_get(gpus->u.array.values[g], "threadblocks");
    if (!YAJL_IS_ARRAY(tbs))
      continue;
    for (size_t b = 0; b < tbs->u.array.len; b++)
      if (scan_legacy_ops(pcl_json_get(tbs->u.array.values[b], "ops"), 0))
        return 1;
  }
  return 0;
}

/* ---- Top level ----------------------------------------------------------------------------- */

/* name, collective, protocol and the boolean flags. */
static ncclResult_t conv_header(pcl_plan_ctx_t *c, yajl_val root, pcl_plan_t *p) {
  const char *s;
  PCL_TRY(pcl_json_str(c, root, "name", 1, &s));
  if (s[0] == '\0')
    return pcl_plan_fail(c, "name", "empty plan name");
  p->name = pcl_strdup(s, "plan name");
  if (p->name == NULL)
    return ncclSystemError;
  PCL_TRY(pcl_json_str(c, root, "collective", 1, &s));
  int coll = pcl_plan_coll_from_name(s);
  if (coll < 0)
    return pcl_plan_fail(c, "collective", "unknown collective '%s'", s);
  p->collective = (pcl_plan_coll_t)coll;
  PCL_TRY(pcl_json_str(c, root, "protocol", 1, &s));
  if (strcmp(s, "LL") == 0)
    p->protocol = PCL_PLAN_PROTO_LL;
  else if (strcmp(s, "Simple") == 0)
    p->protocol = PCL_PLAN_PROTO_SIMPLE;
  else
    return pcl_plan_fail(c, "protocol", "unknown protocol '%s' (expected LL or Simple)", s);
  PCL_TRY(pcl_json_bool(c, root, "inplace", 1, 0, &p->inplace));
  PCL_TRY(pcl_json_bool(c, root, "outofplace_ok", 0, 0, &p->outofplace_ok));
  PCL_TRY(pcl_json_bool(c, root, "reuse_resources", 0, 0, &p->reuse_resources));
  return pcl_json_bool(c, root, "use_double_scratch_buffer", 0, 0, &p->use_double_scratch_buffer);
}

/* Threads, alignment, the message-size range and the priority. */
static ncclResult_t conv_limits(pcl_plan_ctx_t *c, yajl_val root, pcl_plan_t *p) {
  uint64_t u;
  PCL_TRY(pcl_json_int(c, root, "num_threads_per_block", 0, 1024, 32, PCL_PLAN_MAX_THREADS,
                       &p->num_threads_per_block));
  if (p->num_threads_per_block % 32)
    return pcl_plan_fail(c, "num_threads_per_block", "%d is not a multiple of 32",
                         p->num_threads_per_block);
  PCL_TRY(pcl_json_u64(c, root, "buffer_alignment", 0, 16, 1, 4096, &u));
  if (u & (u - 1))
    return pcl_plan_fail(c, "buffer_alignment", "%llu is not a power of two",
                         (unsigned long long)u);
  const unsigned min_align = p->protocol == PCL_PLAN_PROTO_LL ? 8u : 4u;
  if (u < min_align)
    return pcl_plan_fail(c, "buffer_alignment", "%llu is below the minimum of %u for protocol %s",
                         (unsigned long long)u, min_align,
                         p->protocol == PCL_PLAN_PROTO_LL ? "LL" : "Simple");
  p->buffer_alignment = (uint32_t)u;
  PCL_TRY(pcl_json_u64(c, root, "min_message_size", 0, 0, 0, UINT64_MAX, &p->min_message_size));
  PCL_TRY(pcl_json_u64(c, root, "max_message_size", 0, UINT64_MAX, 0, UINT64_MAX,
                       &p->max_message_size));
  if (p->min_message_size > p->max_message_size)
    return pcl_plan_fail(c, "min_message_size", "min_message_size %llu > max_message_size %llu",
                         (unsigned long long)p->min_message_size,
                         (unsigned long long)p->max_message_size);
  return pcl_json_int(c, root, "priority", 0, 0, -1000000, 1000000, &p->priority);
}

/* gpus[] and nranks_per_node. Without nranks_per_node (MSCCL++'s plans carry none) the
 * validator infers the nodes from the memory channels (plan_validate.c, check_nodes). */
static ncclResult_t conv_gpus(pcl_plan_ctx_t *c, yajl_val root, pcl_plan_t *p) {
  yajl_val gpus;
  PCL_TRY(pcl_json_array(c, root, "gpus", 1, PCL_PLAN_MAX_GPUS, "gpus", &gpus));
  if (gpus->u.array.len == 0)
    return pcl_plan_fail(c, "gpus", "a plan needs at least one gpu");
  p->n_gpus = (int)gpus->u.array.len;
  p->nranks_per_node_given = pcl_json_get(root, "nranks_per_node") != NULL;
  PCL_TRY(pcl_json_int(c, root, "nranks_per_node", 0, p->n_gpus, 1, PCL_PLAN_MAX_GPUS,
                       &p->nranks_per_node));
  if (p->nranks_per_node > p->n_gpus) /* a gpus entry deleted, most likely */
    return pcl_plan_fail(c, "gpus", "lists %d ranks, fewer than nranks_per_node (%d)", p->n_gpus,
                         p->nranks_per_node);
  if (p->n_gpus % p->nranks_per_node)
    return pcl_plan_fail(c, "nranks_per_node", "%d gpus do not split into nodes of %d", p->n_gpus,
                         p->nranks_per_node);
  PCL_CALLOC(p->gpus, p->n_gpus, "plan gpus");
  if (p->gpus == NULL)
    return ncclSystemError;
  pcl_plan_conv_t v = {.c = c, .plan = p, .legacy = scan_legacy(root)};
  p->legacy_names = v.legacy;
  size_t p0 = pcl_plan_path_key(c, "gpus");
  for (int g = 0; g < p->n_gpus; g++) {
    size_t p1 = pcl_plan_path_idx(c, g);
    v.gpu = &p->gpus[g];
    v.gpu->id = g;
    PCL_TRY(pcl_plan_conv_gpu(&v, gpus->u.array.values[g]));
    pcl_plan_path_pop(c, p1);
    v.gpu->io_digest = pcl_plan_gpu_digest(gpus->u.array.values[g]);
    for (int b = 0; b < v.gpu->n_blocks; b++)
      for (int i = 0; i < v.gpu->blocks[b].n_ops; i++) {
        const pcl_plan_op_t *op = &v.gpu->blocks[b].ops[i];
        int ro = op->reduce_op;
        if (ro != PCL_PLAN_RED_NONE && ro != PCL_PLAN_RED_AVG)
          p->reduce_ops_mask |= 1u << ro;
        for (int k = 0; k < op->n_src + op->n_dst; k++) {
          const pcl_plan_ref_t *ref = k < op->n_src ? &op->src[k] : &op->dst[k - op->n_src];
          if (ref->type != PCL_PLAN_BUF_SCRATCH &&
              (ref->kind == PCL_PLAN_REF_REMOTE ||
               pcl_plan_operand_by_proxy(op, k >= op->n_src, k < op->n_src ? k : k - op->n_src)))
            p->needs_userbuf = 1;
        }
      }
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_plan(pcl_plan_ctx_t *c, yajl_val root, pcl_plan_t *p) {
  static const char *const keys[] = {"name",
                                     "collective",
                                     "protocol",
                                     "inplace",
                                     "reuse_resources",
                                     "num_threads_per_block",
                                     "use_double_scratch_buffer",
                                     "buffer_alignment",
                                     "min_message_size",
                                     "max_message_size",
                                     "gpus",
                                     "nranks_per_node",
                                     "priority",
                                     "outofplace_ok",
                                     "version",
                                     NULL};
  if (!YAJL_IS_OBJECT(root))
    return pcl_plan_fail(c, NULL, "expected an object at the top level");
  PCL_TRY(pcl_json_check_keys(c, root, keys));
  PCL_TRY(conv_header(c, root, p));
  PCL_TRY(conv_limits(c, root, p));
  return conv_gpus(c, root, p);
}

/* yajl_tree frees recursively; refuse absurd nesting before parsing so neither yajl nor our
 * walkers can exhaust the stack. */
void pcl_plan_destroy(pcl_plan_t *p) {
  if (p == NULL)
    return;
  for (int g = 0; p->gpus && g < p->n_gpus; g++) {
    pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int b = 0; gpu->blocks && b < gpu->n_blocks; b++)
      pcl_free(gpu->blocks[b].ops);
    pcl_free(gpu->blocks);
    for (int t = 0; t < 2; t++)
      pcl_free(gpu->channels[t]);
    for (int s = 0; gpu->switches && s < gpu->n_switch; s++)
      pcl_free(gpu->switches[s].ranks);
    pcl_free(gpu->switches);
    pcl_free(gpu->rbufs);
    pcl_free(gpu->sem_init);
  }
  pcl_free(p->gpus);
  pcl_free(p->name);
  pcl_free(p->path);
  pcl_free(p);
}

ncclResult_t pcl_plan_load_buffer(const char *name, const char *json, size_t len, pcl_plan_t **out,
                                  char *err, size_t errlen) {
  pcl_plan_ctx_t c = {.file = name ? name : "(buffer)", .err = err, .errlen = errlen};
  ncclResult_t res = ncclSuccess;
  pcl_plan_t *p = NULL;
  yajl_val root = NULL;
  *out = NULL;
  if ((res = pcl_json_parse_text(&c, json, len, MAX_JSON_DEPTH, "a plan", &root)) != ncclSuccess)
    goto out;
  PCL_CALLOC(p, 1, "plan");
  if (p == NULL) {
    res = ncclSystemError;
    goto out;
  }
  p->path = pcl_strdup(c.file, "plan path");
  if (p->path == NULL) {
    res = ncclSystemError;
    goto out;
  }
  res = conv_plan(&c, root, p);
  if (res == ncclSuccess)
    res = pcl_plan_validate(p, &c);
  if (res == ncclSuccess && c.failed)
    res = ncclInvalidArgument;
  if (res == ncclSystemError && err && errlen && !c.failed)
    snprintf(err, errlen, "%s: out of memory", c.file);
out:
  if (root)
    yajl_tree_free(root);
  if (res != ncclSuccess) {
    pcl_plan_destroy(p);
    PCL_INFO(PCL_LOG_PLAN, "plan refused: %s", err ? err : c.file);
    return res;
  }
  *out = p;
  return ncclSuccess;
}

ncclResult_t pcl_plan_load(const char *path, pcl_plan_t **out, char *err, size_t errlen) {
  char *buf = NULL;
  size_t len = 0;
  *out = NULL;
  if (err && errlen)
    err[0] = '\0';
  ncclResult_t res =
      pcl_json_read_file(path, MAX_FILE_BYTES,
                         "a plan file (name its .json files; PLANCCL_PLAN_DIR takes directories)",
                         &buf, &len, err, errlen);
  if (res == ncclSuccess)
    res = pcl_plan_load_buffer(path, buf, len, out, err, errlen);
  pcl_free(buf);
  return res;
}
