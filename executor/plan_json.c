/* SPDX-License-Identifier: MIT
 * The plan loader: reads an MSCCL++ executor JSON plan with yajl (the only yajl user in planccl),
 * converts it into the immutable pcl_plan_t structs, checking every field's type, range and
 * reference on the way, then hands the result to the semantic validator (plan_validate.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "alloc.h"
#include "log.h"
#include "plan_int.h"

#define MAX_JSON_DEPTH 64
#define MAX_FILE_BYTES (64u << 20)
#define MAX_CHUNKS (1u << 24)
#define MAX_GPU_CHANNELS 4096
#define MAX_RBUFS 4096

/* ---- Small JSON accessors --------------------------------------------------------------- */

static const char *type_name(yajl_val v) {
  if (v == NULL) return "nothing";
  switch (v->type) {
  case yajl_t_string: return "a string";
  case yajl_t_number: return "a number";
  case yajl_t_object: return "an object";
  case yajl_t_array: return "an array";
  case yajl_t_true:
  case yajl_t_false: return "a boolean";
  case yajl_t_null: return "null";
  default: return "something else";
  }
}

static yajl_val obj_get(yajl_val o, const char *key) {
  if (!YAJL_IS_OBJECT(o)) return NULL;
  for (size_t i = 0; i < o->u.object.len; i++)
    if (strcmp(o->u.object.keys[i], key) == 0) return o->u.object.values[i];
  return NULL;
}

/* Refuses unknown and duplicate keys. Keys starting with '_' are comments and ignored. */
static ncclResult_t check_keys(pcl_plan_ctx_t *c, yajl_val o, const char *const *known) {
  for (size_t i = 0; i < o->u.object.len; i++) {
    const char *k = o->u.object.keys[i];
    if (k[0] == '_') continue;
    int ok = 0;
    for (const char *const *p = known; *p; p++)
      if (strcmp(*p, k) == 0) ok = 1;
    if (!ok) return pcl_plan_fail(c, k, "unknown field");
    for (size_t j = 0; j < i; j++)
      if (strcmp(o->u.object.keys[j], k) == 0) return pcl_plan_fail(c, k, "duplicate field");
  }
  return ncclSuccess;
}

static ncclResult_t need_object(pcl_plan_ctx_t *c, yajl_val v, const char *key) {
  if (!YAJL_IS_OBJECT(v)) return pcl_plan_fail(c, key, "expected an object, got %s", type_name(v));
  return ncclSuccess;
}

/* Unsigned integer field. Parsed from yajl's raw text so the full uint64 range works. */
static ncclResult_t get_u64(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                            uint64_t def, uint64_t min, uint64_t max, uint64_t *out) {
  yajl_val v = obj_get(o, key);
  if (v == NULL) {
    if (required) return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (!YAJL_IS_NUMBER(v)) return pcl_plan_fail(c, key, "expected an integer, got %s", type_name(v));
  const char *r = YAJL_GET_NUMBER(v);
  if (r == NULL || r[0] < '0' || r[0] > '9')
    return pcl_plan_fail(c, key, "expected a non-negative integer, got %s", r ? r : "?");
  for (const char *p = r; *p; p++)
    if (*p < '0' || *p > '9') return pcl_plan_fail(c, key, "expected an integer, got %s", r);
  errno = 0;
  unsigned long long x = strtoull(r, NULL, 10);
  if (errno == ERANGE || x < min || x > max)
    return pcl_plan_fail(c, key, "value %s out of range [%llu, %llu]", r,
                         (unsigned long long)min, (unsigned long long)max);
  *out = x;
  return ncclSuccess;
}

static ncclResult_t get_int(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                            int min, int max, int *out) {
  yajl_val v = obj_get(o, key);
  if (v == NULL) {
    if (required) return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (!YAJL_IS_INTEGER(v)) return pcl_plan_fail(c, key, "expected an integer, got %s", type_name(v));
  long long x = YAJL_GET_INTEGER(v);
  if (x < min || x > max) return pcl_plan_fail(c, key, "value %lld out of range [%d, %d]", x, min, max);
  *out = (int)x;
  return ncclSuccess;
}

static ncclResult_t get_bool(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                             int *out) {
  yajl_val v = obj_get(o, key);
  if (v == NULL) {
    if (required) return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (YAJL_IS_TRUE(v)) *out = 1;
  else if (YAJL_IS_FALSE(v)) *out = 0;
  else return pcl_plan_fail(c, key, "expected a boolean, got %s", type_name(v));
  return ncclSuccess;
}

static ncclResult_t get_str(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                            const char **out) {
  yajl_val v = obj_get(o, key);
  *out = NULL;
  if (v == NULL) return required ? pcl_plan_fail(c, key, "missing required field") : ncclSuccess;
  if (!YAJL_IS_STRING(v)) return pcl_plan_fail(c, key, "expected a string, got %s", type_name(v));
  *out = YAJL_GET_STRING(v);
  return ncclSuccess;
}

/* Array field; *out stays NULL when optional and absent. */
static ncclResult_t get_array(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                              size_t max, const char *what, yajl_val *out) {
  yajl_val v = obj_get(o, key);
  *out = NULL;
  if (v == NULL) return required ? pcl_plan_fail(c, key, "missing required field") : ncclSuccess;
  if (!YAJL_IS_ARRAY(v)) return pcl_plan_fail(c, key, "expected an array, got %s", type_name(v));
  if (v->u.array.len > max)
    return pcl_plan_fail(c, key, "%zu %s exceed the limit of %zu", v->u.array.len, what, max);
  *out = v;
  return ncclSuccess;
}

/* Pre-scan: does the plan use any v0.7-only op or channel name? Tolerates malformed input (the
 * real conversion reports it). */
static int scan_legacy_ops(yajl_val ops, int depth) {
  if (!YAJL_IS_ARRAY(ops) || depth > 2) return 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    yajl_val op = ops->u.array.values[i];
    yajl_val n = obj_get(op, "name"), ct = obj_get(op, "channel_type");
    if (YAJL_IS_STRING(n) && pcl_plan_name_is_legacy(YAJL_GET_STRING(n))) return 1;
    if (YAJL_IS_STRING(ct) && pcl_plan_name_is_legacy(YAJL_GET_STRING(ct))) return 1;
    if (scan_legacy_ops(obj_get(op, "ops"), depth + 1)) return 1;
  }
  return 0;
}

static int scan_legacy(yajl_val root) {
  yajl_val gpus = obj_get(root, "gpus");
  if (!YAJL_IS_ARRAY(gpus)) return 0;
  for (size_t g = 0; g < gpus->u.array.len; g++) {
    yajl_val tbs = obj_get(gpus->u.array.values[g], "threadblocks");
    if (!YAJL_IS_ARRAY(tbs)) continue;
    for (size_t b = 0; b < tbs->u.array.len; b++)
      if (scan_legacy_ops(obj_get(tbs->u.array.values[b], "ops"), 0)) return 1;
  }
  return 0;
}

/* ---- Conversion: per gpu ----------------------------------------------------------------- */

typedef struct {
  pcl_plan_ctx_t *c;
  pcl_plan_t *plan;
  pcl_plan_gpu_t *gpu;
  pcl_plan_block_t *blk;
  int legacy;
} conv_t;

static ncclResult_t conv_ref(conv_t *v, yajl_val r, pcl_plan_op_t *op, pcl_plan_ref_t *ref) {
  static const char *const keys[] = {"type", "buffer_id", "switch_channel_id", "index", "size", NULL};
  pcl_plan_ctx_t *c = v->c;
  ncclResult_t res;
  if ((res = need_object(c, r, NULL)) != ncclSuccess) return res;
  if ((res = check_keys(c, r, keys)) != ncclSuccess) return res;
  yajl_val t = obj_get(r, "type"), b = obj_get(r, "buffer_id"), s = obj_get(r, "switch_channel_id");
  int nkinds = (t != NULL) + (b != NULL) + (s != NULL);
  if (nkinds != 1)
    return pcl_plan_fail(c, NULL, "a buffer reference needs exactly one of type, buffer_id, "
                                  "switch_channel_id");
  uint64_t index, size, slot;
  if ((res = get_u64(c, r, "index", 1, 0, 0, MAX_CHUNKS, &index)) != ncclSuccess) return res;
  if ((res = get_u64(c, r, "size", 1, 0, 1, MAX_CHUNKS, &size)) != ncclSuccess) return res;
  ref->index = (uint32_t)index;
  ref->size = (uint32_t)size;
  ref->rbuf = -1;
  if (t) {
    const char *ts;
    if ((res = get_str(c, r, "type", 1, &ts)) != ncclSuccess) return res;
    int bt = pcl_plan_buf_from_name(ts);
    if (bt < 0) return pcl_plan_fail(c, "type", "unknown buffer type '%s' (expected i, o or s)", ts);
    ref->kind = PCL_PLAN_REF_LOCAL;
    ref->type = (uint8_t)bt;
    ref->rank = v->gpu->id;
    ref->slot = 0;
  } else if (b) {
    if ((res = get_u64(c, r, "buffer_id", 1, 0, 0, 65535, &slot)) != ncclSuccess) return res;
    int ct = op->channel_type;
    if (ct != PCL_PLAN_CHAN_MEMORY && ct != PCL_PLAN_CHAN_PORT)
      return pcl_plan_fail(c, "buffer_id", "remote buffer reference on an op whose channel_type "
                                           "is %s (needs memory or port)", pcl_plan_chan_name(ct));
    if ((int)slot >= v->blk->n_rbufs[ct])
      return pcl_plan_fail(c, "buffer_id", "remote buffer slot %d out of range [0, %d) of the "
                                           "threadblock's %s remote_buffer_refs",
                           (int)slot, v->blk->n_rbufs[ct], pcl_plan_chan_name(ct));
    int rb = v->blk->rbufs[ct][slot];
    ref->kind = PCL_PLAN_REF_REMOTE;
    ref->slot = (uint16_t)slot;
    ref->rbuf = rb;
    ref->type = v->gpu->rbufs[rb].type;
    ref->rank = v->gpu->rbufs[rb].rank;
  } else {
    if ((res = get_u64(c, r, "switch_channel_id", 1, 0, 0, 65535, &slot)) != ncclSuccess) return res;
    if ((int)slot >= v->blk->n_channels[PCL_PLAN_CHAN_SWITCH])
      return pcl_plan_fail(c, "switch_channel_id", "switch channel slot %d out of range [0, %d)",
                           (int)slot, v->blk->n_channels[PCL_PLAN_CHAN_SWITCH]);
    ref->kind = PCL_PLAN_REF_SWITCH;
    ref->slot = (uint16_t)slot;
    ref->type = v->gpu->switches[v->blk->channels[PCL_PLAN_CHAN_SWITCH][slot]].buffer_type;
    ref->rank = -1;
  }
  return ncclSuccess;
}

static ncclResult_t conv_refs(conv_t *v, yajl_val o, const char *key, pcl_plan_op_t *op,
                              pcl_plan_ref_t *refs, uint8_t *n) {
  pcl_plan_ctx_t *c = v->c;
  yajl_val a;
  ncclResult_t res = get_array(c, o, key, 0, PCL_PLAN_MAX_OP_BUFS, "buffer references", &a);
  if (res != ncclSuccess || a == NULL) return res;
  size_t p0 = pcl_plan_path_key(c, key);
  int nremote = 0;
  for (size_t i = 0; i < a->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    if ((res = conv_ref(v, a->u.array.values[i], op, &refs[i])) != ncclSuccess) return res;
    if (refs[i].kind != PCL_PLAN_REF_LOCAL) nremote++;
    pcl_plan_path_pop(c, p1);
    /* Only the total (10 per side) is a hard device limit; MSCCL++ nominally splits it 2 local
     * + 8 channel refs, but reduce-packet ops legitimately read 1 + (n-1) local scratch slots. */
    if (nremote > PCL_PLAN_MAX_OP_REMOTE_BUFS)
      return pcl_plan_fail(c, NULL, "more than %d remote buffer references",
                           PCL_PLAN_MAX_OP_REMOTE_BUFS);
  }
  *n = (uint8_t)a->u.array.len;
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_op(conv_t *v, yajl_val o, pcl_plan_op_t *op, int nested) {
  static const char *const keys[] = {"name", "channel_type", "channel_ids", "src_buff", "dst_buff",
                                     "tbg_info", "barrier_id", "num_threadblocks", "semaphore_ids",
                                     "iter_context", "ops", "reduce_op", NULL};
  pcl_plan_ctx_t *c = v->c;
  ncclResult_t res;
  const char *s;
  if ((res = need_object(c, o, NULL)) != ncclSuccess) return res;
  if ((res = check_keys(c, o, keys)) != ncclSuccess) return res;
  if ((res = get_str(c, o, "name", 1, &s)) != ncclSuccess) return res;
  int t = pcl_plan_op_from_name(s, v->legacy);
  if (t < 0) {
    if (strcmp(s, "glre") == 0)
      return pcl_plan_fail(c, "name", "op 'glre' must be fused into 'glres' (not an executor op)");
    return pcl_plan_fail(c, "name", "unknown op '%s'", s);
  }
  op->type = (uint8_t)t;
  op->barrier_id = -1;
  op->tbg_size = 1;
  op->reduce_op = PCL_PLAN_RED_NONE;
  op->channel_type = PCL_PLAN_CHAN_NONE;
  if ((res = get_str(c, o, "channel_type", 0, &s)) != ncclSuccess) return res;
  if (s) {
    int ct = pcl_plan_chan_from_name(s, NULL);
    if (ct < 0) return pcl_plan_fail(c, "channel_type", "unknown channel type '%s'", s);
    op->channel_type = (uint8_t)ct;
  }
  if ((res = get_str(c, o, "reduce_op", 0, &s)) != ncclSuccess) return res;
  /* No reduce_op means "the call's op" (DESIGN.md): only an explicit one constrains the plan. */
  if (pcl_plan_op_is_reduce(t)) {
    int r = s ? pcl_plan_red_from_name(s) : PCL_PLAN_RED_NONE;
    if (r < 0) return pcl_plan_fail(c, "reduce_op", "unknown reduce_op '%s'", s);
    op->reduce_op = (uint8_t)r;
  } else if (s && pcl_plan_red_from_name(s) < 0) {
    return pcl_plan_fail(c, "reduce_op", "unknown reduce_op '%s'", s);
  }

  yajl_val a;
  if ((res = get_array(c, o, "channel_ids", 0, PCL_PLAN_MAX_OP_CHANNELS, "channel ids", &a)) !=
      ncclSuccess)
    return res;
  if (a && a->u.array.len > 0) {
    int ct = op->channel_type;
    if (ct == PCL_PLAN_CHAN_NONE)
      return pcl_plan_fail(c, "channel_ids", "channel_ids given but the op has no channel_type");
    size_t p0 = pcl_plan_path_key(c, "channel_ids");
    for (size_t i = 0; i < a->u.array.len; i++) {
      yajl_val e = a->u.array.values[i];
      size_t p1 = pcl_plan_path_idx(c, (int)i);
      if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0)
        return pcl_plan_fail(c, NULL, "expected a non-negative integer, got %s", type_name(e));
      long long id = YAJL_GET_INTEGER(e);
      if (id >= v->blk->n_channels[ct])
        return pcl_plan_fail(c, NULL, "channel slot %lld out of range [0, %d) of the "
                                      "threadblock's %s channels",
                             id, v->blk->n_channels[ct], pcl_plan_chan_name(ct));
      for (size_t j = 0; j < i; j++)
        if (op->channels[j] == id) return pcl_plan_fail(c, NULL, "channel slot %lld repeated", id);
      op->channels[i] = (uint16_t)id;
      op->gpu_channels[i] = v->blk->channels[ct][id];
      pcl_plan_path_pop(c, p1);
    }
    pcl_plan_path_pop(c, p0);
    op->n_channels = (uint8_t)a->u.array.len;
  }

  if ((res = conv_refs(v, o, "src_buff", op, op->src, &op->n_src)) != ncclSuccess) return res;
  if ((res = conv_refs(v, o, "dst_buff", op, op->dst, &op->n_dst)) != ncclSuccess) return res;

  yajl_val tbg = obj_get(o, "tbg_info");
  if (tbg) {
    static const char *const tkeys[] = {"tb_id", "tbg_size", NULL};
    size_t p0 = pcl_plan_path_key(c, "tbg_info");
    uint64_t id, size;
    if ((res = need_object(c, tbg, NULL)) != ncclSuccess) return res;
    if ((res = check_keys(c, tbg, tkeys)) != ncclSuccess) return res;
    if ((res = get_u64(c, tbg, "tbg_size", 1, 1, 1, PCL_PLAN_MAX_BLOCKS, &size)) != ncclSuccess)
      return res;
    if ((res = get_u64(c, tbg, "tb_id", 1, 0, 0, size - 1, &id)) != ncclSuccess) return res;
    op->tbg_id = (uint16_t)id;
    op->tbg_size = (uint16_t)size;
    pcl_plan_path_pop(c, p0);
  }
  int x;
  if ((res = get_int(c, o, "barrier_id", 0, -1, 0, PCL_PLAN_MAX_BARRIERS - 1, &x)) != ncclSuccess)
    return res;
  op->barrier_id = (int16_t)x;
  if ((res = get_int(c, o, "num_threadblocks", 0, 0, 1, PCL_PLAN_MAX_BLOCKS, &x)) != ncclSuccess)
    return res;
  op->num_threadblocks = (uint16_t)x;

  if ((res = get_array(c, o, "semaphore_ids", 0, PCL_PLAN_MAX_OP_SEMS, "semaphore ids", &a)) !=
      ncclSuccess)
    return res;
  if (a) {
    size_t p0 = pcl_plan_path_key(c, "semaphore_ids");
    for (size_t i = 0; i < a->u.array.len; i++) {
      yajl_val e = a->u.array.values[i];
      size_t p1 = pcl_plan_path_idx(c, (int)i);
      if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0)
        return pcl_plan_fail(c, NULL, "expected a non-negative integer, got %s", type_name(e));
      if (YAJL_GET_INTEGER(e) >= v->gpu->n_sems)
        return pcl_plan_fail(c, NULL, "semaphore %lld out of range [0, %d) of the gpu's semaphores",
                             YAJL_GET_INTEGER(e), v->gpu->n_sems);
      op->sem_ids[i] = (uint16_t)YAJL_GET_INTEGER(e);
      pcl_plan_path_pop(c, p1);
    }
    pcl_plan_path_pop(c, p0);
    op->n_sems = (uint8_t)a->u.array.len;
  }

  yajl_val ic = obj_get(o, "iter_context");
  if (ic) {
    static const char *const ikeys[] = {"unit_size", "num_chunks", NULL};
    size_t p0 = pcl_plan_path_key(c, "iter_context");
    uint64_t u, n;
    if ((res = need_object(c, ic, NULL)) != ncclSuccess) return res;
    if ((res = check_keys(c, ic, ikeys)) != ncclSuccess) return res;
    if ((res = get_u64(c, ic, "unit_size", 1, 0, 1, 0xffffffffu, &u)) != ncclSuccess) return res;
    if ((res = get_u64(c, ic, "num_chunks", 1, 0, 1, MAX_CHUNKS, &n)) != ncclSuccess) return res;
    op->unit_size = (uint32_t)u;
    op->num_chunks = (uint32_t)n;
    pcl_plan_path_pop(c, p0);
  }
  if (t == PCL_PLAN_OP_PIPELINE) {
    if (nested) return pcl_plan_fail(c, "name", "pipelines cannot be nested");
    if (!ic) return pcl_plan_fail(c, "iter_context", "pipeline op needs iter_context");
    if ((res = get_array(c, o, "ops", 1, PCL_PLAN_MAX_OPS_PER_BLOCK, "ops", &a)) != ncclSuccess)
      return res;
    if (a->u.array.len == 0) return pcl_plan_fail(c, "ops", "pipeline op with no inner ops");
  } else {
    if (ic) return pcl_plan_fail(c, "iter_context", "only a pipeline op takes iter_context");
    if (obj_get(o, "ops")) return pcl_plan_fail(c, "ops", "only a pipeline op takes nested ops");
  }
  return ncclSuccess;
}

/* Threadblock ops, flattened: a pipeline is followed by its inner ops. */
static ncclResult_t conv_ops(conv_t *v, yajl_val ops) {
  pcl_plan_ctx_t *c = v->c;
  ncclResult_t res;
  size_t total = 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    yajl_val inner = obj_get(ops->u.array.values[i], "ops");
    total += 1 + (YAJL_IS_ARRAY(inner) ? inner->u.array.len : 0);
  }
  if (total > PCL_PLAN_MAX_OPS_PER_BLOCK)
    return pcl_plan_fail(c, "ops", "%zu ops (pipeline inner ops included) exceed the limit of %d "
                                   "per threadblock",
                         total, PCL_PLAN_MAX_OPS_PER_BLOCK);
  if (total == 0) return ncclSuccess;
  PCL_CALLOC(v->blk->ops, total, "plan ops");
  if (v->blk->ops == NULL) return ncclSystemError;
  size_t p0 = pcl_plan_path_key(c, "ops");
  int k = 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    pcl_plan_op_t *op = &v->blk->ops[k++];
    if ((res = conv_op(v, ops->u.array.values[i], op, 0)) != ncclSuccess) return res;
    if (op->type == PCL_PLAN_OP_PIPELINE) {
      yajl_val inner = obj_get(ops->u.array.values[i], "ops");
      size_t p2 = pcl_plan_path_key(c, "ops");
      for (size_t j = 0; j < inner->u.array.len; j++) {
        size_t p3 = pcl_plan_path_idx(c, (int)j);
        pcl_plan_op_t *iop = &v->blk->ops[k++];
        if ((res = conv_op(v, inner->u.array.values[j], iop, 1)) != ncclSuccess) return res;
        iop->in_pipeline = 1;
        pcl_plan_path_pop(c, p3);
      }
      op->n_inner = (uint16_t)inner->u.array.len;
      pcl_plan_path_pop(c, p2);
    }
    pcl_plan_path_pop(c, p1);
  }
  v->blk->n_ops = k;
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_block(conv_t *v, yajl_val o) {
  static const char *const keys[] = {"id", "ops", "channels", "remote_buffer_refs", NULL};
  static const char *const ckeys[] = {"channel_type", "channel_ids", "buff", NULL};
  static const char *const rkeys[] = {"access_channel_type", "remote_buffer_ids", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_block_t *b = v->blk;
  ncclResult_t res;
  yajl_val a;
  const char *s;
  if ((res = need_object(c, o, NULL)) != ncclSuccess) return res;
  if ((res = check_keys(c, o, keys)) != ncclSuccess) return res;
  int id;
  if ((res = get_int(c, o, "id", 1, 0, 0, 1 << 30, &id)) != ncclSuccess) return res;
  if (id != b->id)
    return pcl_plan_fail(c, "id", "threadblock id %d does not match its position %d", id, b->id);

  if ((res = get_array(c, o, "channels", 0, 64, "channel groups", &a)) != ncclSuccess) return res;
  size_t p0 = pcl_plan_path_key(c, "channels");
  for (size_t i = 0; a && i < a->u.array.len; i++) {
    yajl_val g = a->u.array.values[i], ids;
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    if ((res = need_object(c, g, NULL)) != ncclSuccess) return res;
    if ((res = check_keys(c, g, ckeys)) != ncclSuccess) return res;
    if ((res = get_str(c, g, "channel_type", 1, &s)) != ncclSuccess) return res;
    int ct = pcl_plan_chan_from_name(s, NULL);
    if (ct < 0 || ct == PCL_PLAN_CHAN_NONE)
      return pcl_plan_fail(c, "channel_type", "unknown channel type '%s'", s);
    if ((res = get_array(c, g, "channel_ids", 1, PCL_PLAN_MAX_BLOCK_CHANNELS, "channel ids",
                         &ids)) != ncclSuccess)
      return res;
    int ngpu = ct == PCL_PLAN_CHAN_SWITCH ? v->gpu->n_switch : v->gpu->n_channels[ct];
    size_t p2 = pcl_plan_path_key(c, "channel_ids");
    for (size_t j = 0; j < ids->u.array.len; j++) {
      yajl_val e = ids->u.array.values[j];
      size_t p3 = pcl_plan_path_idx(c, (int)j);
      if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0)
        return pcl_plan_fail(c, NULL, "expected a non-negative integer, got %s", type_name(e));
      if (YAJL_GET_INTEGER(e) >= ngpu)
        return pcl_plan_fail(c, NULL, "%s channel %lld out of range [0, %d) of the gpu's channels",
                             pcl_plan_chan_name(ct), YAJL_GET_INTEGER(e), ngpu);
      if (b->n_channels[ct] >= PCL_PLAN_MAX_BLOCK_CHANNELS)
        return pcl_plan_fail(c, NULL, "more than %d %s channels in one threadblock",
                             PCL_PLAN_MAX_BLOCK_CHANNELS, pcl_plan_chan_name(ct));
      b->channels[ct][b->n_channels[ct]++] = (int16_t)YAJL_GET_INTEGER(e);
      pcl_plan_path_pop(c, p3);
    }
    pcl_plan_path_pop(c, p2);
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);

  if ((res = get_array(c, o, "remote_buffer_refs", 0, 64, "remote buffer groups", &a)) !=
      ncclSuccess)
    return res;
  p0 = pcl_plan_path_key(c, "remote_buffer_refs");
  for (size_t i = 0; a && i < a->u.array.len; i++) {
    yajl_val g = a->u.array.values[i], ids;
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    if ((res = need_object(c, g, NULL)) != ncclSuccess) return res;
    if ((res = check_keys(c, g, rkeys)) != ncclSuccess) return res;
    if ((res = get_str(c, g, "access_channel_type", 1, &s)) != ncclSuccess) return res;
    int ct = pcl_plan_chan_from_name(s, NULL);
    if (ct != PCL_PLAN_CHAN_MEMORY && ct != PCL_PLAN_CHAN_PORT)
      return pcl_plan_fail(c, "access_channel_type", "remote buffers are accessed through memory "
                                                     "or port channels, not '%s'", s);
    if ((res = get_array(c, g, "remote_buffer_ids", 1, PCL_PLAN_MAX_BLOCK_RBUFS, "remote buffer ids",
                         &ids)) != ncclSuccess)
      return res;
    size_t p2 = pcl_plan_path_key(c, "remote_buffer_ids");
    for (size_t j = 0; j < ids->u.array.len; j++) {
      yajl_val e = ids->u.array.values[j];
      size_t p3 = pcl_plan_path_idx(c, (int)j);
      if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0)
        return pcl_plan_fail(c, NULL, "expected a non-negative integer, got %s", type_name(e));
      long long rb = YAJL_GET_INTEGER(e);
      if (rb >= v->gpu->n_rbufs)
        return pcl_plan_fail(c, NULL, "remote buffer %lld out of range [0, %d) of the gpu's "
                                      "remote_buffers", rb, v->gpu->n_rbufs);
      if (!(v->gpu->rbufs[rb].access & (1u << ct)))
        return pcl_plan_fail(c, NULL, "remote buffer %lld is not accessible through %s channels "
                                      "(see its access_channel_types)", rb, pcl_plan_chan_name(ct));
      if (b->n_rbufs[ct] >= PCL_PLAN_MAX_BLOCK_RBUFS)
        return pcl_plan_fail(c, NULL, "more than %d %s remote buffer slots in one threadblock",
                             PCL_PLAN_MAX_BLOCK_RBUFS, pcl_plan_chan_name(ct));
      b->rbufs[ct][b->n_rbufs[ct]++] = (int16_t)rb;
      pcl_plan_path_pop(c, p3);
    }
    pcl_plan_path_pop(c, p2);
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);

  if ((res = get_array(c, o, "ops", 1, PCL_PLAN_MAX_OPS_PER_BLOCK, "ops", &a)) != ncclSuccess)
    return res;
  return conv_ops(v, a);
}

static ncclResult_t conv_channels(conv_t *v, yajl_val a) {
  static const char *const keys[] = {"channel_type", "connected_to", "buffer_type", "buff",
                                     "rank_groups", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  ncclResult_t res;
  const char *s;
  /* Pass 1: validate and count, pass 2: fill. */
  int count[PCL_PLAN_CHAN_COUNT] = {0};
  size_t p0 = pcl_plan_path_key(c, "channels");
  for (int pass = 0; pass < 2; pass++) {
    int fill[PCL_PLAN_CHAN_COUNT] = {0};
    for (size_t i = 0; i < a->u.array.len; i++) {
      yajl_val e = a->u.array.values[i], l;
      size_t p1 = pcl_plan_path_idx(c, (int)i);
      if ((res = need_object(c, e, NULL)) != ncclSuccess) return res;
      if ((res = check_keys(c, e, keys)) != ncclSuccess) return res;
      if ((res = get_str(c, e, "channel_type", 1, &s)) != ncclSuccess) return res;
      int ct = pcl_plan_chan_from_name(s, NULL);
      if (ct < 0 || ct == PCL_PLAN_CHAN_NONE)
        return pcl_plan_fail(c, "channel_type", "unknown channel type '%s'", s);
      if (ct != PCL_PLAN_CHAN_SWITCH) {
        if ((res = get_array(c, e, "connected_to", 1, MAX_GPU_CHANNELS, "peers", &l)) != ncclSuccess)
          return res;
        size_t p2 = pcl_plan_path_key(c, "connected_to");
        for (size_t j = 0; j < l->u.array.len; j++) {
          yajl_val p = l->u.array.values[j];
          size_t p3 = pcl_plan_path_idx(c, (int)j);
          if (!YAJL_IS_INTEGER(p) || YAJL_GET_INTEGER(p) < 0 ||
              YAJL_GET_INTEGER(p) >= v->plan->n_gpus)
            return pcl_plan_fail(c, NULL, "peer must be a rank in [0, %d)", v->plan->n_gpus);
          if (YAJL_GET_INTEGER(p) == g->id)
            return pcl_plan_fail(c, NULL, "a channel cannot connect rank %d to itself", g->id);
          if (pass == 0 && ++count[ct] > MAX_GPU_CHANNELS)
            return pcl_plan_fail(c, NULL, "more than %d %s channels", MAX_GPU_CHANNELS, s);
          if (pass == 1) {
            g->channels[ct][fill[ct]].peer = (int32_t)YAJL_GET_INTEGER(p);
            g->channels[ct][fill[ct]].peer_channel = -1;
            fill[ct]++;
          }
          pcl_plan_path_pop(c, p3);
        }
        pcl_plan_path_pop(c, p2);
      } else {
        const char *bs = NULL;
        if ((res = get_str(c, e, "buffer_type", 0, &bs)) != ncclSuccess) return res;
        if (bs == NULL && (res = get_str(c, e, "buff", 0, &bs)) != ncclSuccess) return res;
        int bt = bs ? pcl_plan_buf_from_name(bs) : -1;
        if (bt < 0) return pcl_plan_fail(c, "buffer_type", "switch channel needs buffer_type i, o or s");
        if ((res = get_array(c, e, "rank_groups", 1, 64, "rank groups", &l)) != ncclSuccess)
          return res;
        size_t p2 = pcl_plan_path_key(c, "rank_groups");
        for (size_t j = 0; j < l->u.array.len; j++) {
          yajl_val rg = l->u.array.values[j], ranks;
          static const char *const gkeys[] = {"size", "ranks", NULL};
          size_t p3 = pcl_plan_path_idx(c, (int)j);
          uint64_t size;
          if ((res = need_object(c, rg, NULL)) != ncclSuccess) return res;
          if ((res = check_keys(c, rg, gkeys)) != ncclSuccess) return res;
          if ((res = get_u64(c, rg, "size", 1, 0, 0, MAX_CHUNKS, &size)) != ncclSuccess) return res;
          if ((res = get_array(c, rg, "ranks", 1, PCL_PLAN_MAX_GPUS, "ranks", &ranks)) != ncclSuccess)
            return res;
          for (size_t k = 0; k < ranks->u.array.len; k++) {
            yajl_val r = ranks->u.array.values[k];
            if (!YAJL_IS_INTEGER(r) || YAJL_GET_INTEGER(r) < 0 ||
                YAJL_GET_INTEGER(r) >= v->plan->n_gpus)
              return pcl_plan_fail(c, "ranks", "rank must be in [0, %d)", v->plan->n_gpus);
          }
          if (pass == 0 && ++count[ct] > 64)
            return pcl_plan_fail(c, NULL, "more than 64 switch channels");
          if (pass == 1) {
            pcl_plan_switch_t *sw = &g->switches[fill[ct]++];
            sw->buffer_type = (uint8_t)bt;
            sw->size = (uint32_t)size;
            sw->n_ranks = (int)ranks->u.array.len;
            if (sw->n_ranks) {
              PCL_CALLOC(sw->ranks, sw->n_ranks, "plan switch ranks");
              if (sw->ranks == NULL) return ncclSystemError;
              for (int k = 0; k < sw->n_ranks; k++)
                sw->ranks[k] = (int32_t)YAJL_GET_INTEGER(ranks->u.array.values[k]);
            }
          }
          pcl_plan_path_pop(c, p3);
        }
        pcl_plan_path_pop(c, p2);
      }
      pcl_plan_path_pop(c, p1);
    }
    if (pass == 0) {
      for (int t = 0; t < 2; t++) {
        g->n_channels[t] = count[t];
        if (count[t]) {
          PCL_CALLOC(g->channels[t], count[t], "plan channels");
          if (g->channels[t] == NULL) return ncclSystemError;
        }
      }
      g->n_switch = count[PCL_PLAN_CHAN_SWITCH];
      if (g->n_switch) {
        PCL_CALLOC(g->switches, g->n_switch, "plan switch channels");
        if (g->switches == NULL) return ncclSystemError;
      }
    }
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_rbufs(conv_t *v, yajl_val a) {
  static const char *const keys[] = {"rank", "type", "access_channel_types", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  ncclResult_t res;
  const char *s;
  g->n_rbufs = (int)a->u.array.len;
  if (g->n_rbufs) {
    PCL_CALLOC(g->rbufs, g->n_rbufs, "plan remote buffers");
    if (g->rbufs == NULL) return ncclSystemError;
  }
  size_t p0 = pcl_plan_path_key(c, "remote_buffers");
  for (int i = 0; i < g->n_rbufs; i++) {
    yajl_val e = a->u.array.values[i], acc;
    size_t p1 = pcl_plan_path_idx(c, i);
    int rank;
    if ((res = need_object(c, e, NULL)) != ncclSuccess) return res;
    if ((res = check_keys(c, e, keys)) != ncclSuccess) return res;
    if ((res = get_int(c, e, "rank", 1, 0, 0, v->plan->n_gpus - 1, &rank)) != ncclSuccess)
      return res;
    if (rank == g->id)
      return pcl_plan_fail(c, "rank", "a remote buffer must belong to another rank (got %d)", rank);
    if ((res = get_str(c, e, "type", 1, &s)) != ncclSuccess) return res;
    int bt = pcl_plan_buf_from_name(s);
    if (bt < 0) return pcl_plan_fail(c, "type", "unknown buffer type '%s' (expected i, o or s)", s);
    if ((res = get_array(c, e, "access_channel_types", 1, 4, "channel types", &acc)) != ncclSuccess)
      return res;
    if (acc->u.array.len == 0)
      return pcl_plan_fail(c, "access_channel_types", "at least one access channel type needed");
    uint8_t mask = 0;
    for (size_t j = 0; j < acc->u.array.len; j++) {
      yajl_val t = acc->u.array.values[j];
      int ct = YAJL_IS_STRING(t) ? pcl_plan_chan_from_name(YAJL_GET_STRING(t), NULL) : -1;
      if (ct != PCL_PLAN_CHAN_MEMORY && ct != PCL_PLAN_CHAN_PORT)
        return pcl_plan_fail(c, "access_channel_types", "access channel types are memory or port");
      mask |= (uint8_t)(1u << ct);
    }
    g->rbufs[i].rank = rank;
    g->rbufs[i].type = (uint8_t)bt;
    g->rbufs[i].access = mask;
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_gpu(conv_t *v, yajl_val o) {
  static const char *const keys[] = {"id", "input_chunks", "output_chunks", "scratch_chunks",
                                     "channels", "remote_buffers", "semaphores", "threadblocks",
                                     NULL};
  static const char *const skeys[] = {"init_value", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  ncclResult_t res;
  yajl_val a;
  int id;
  if ((res = need_object(c, o, NULL)) != ncclSuccess) return res;
  if ((res = check_keys(c, o, keys)) != ncclSuccess) return res;
  if ((res = get_int(c, o, "id", 1, 0, 0, 1 << 30, &id)) != ncclSuccess) return res;
  if (id != g->id) return pcl_plan_fail(c, "id", "gpus[%d].id is %d: gpus must be listed by rank",
                                        g->id, id);
  static const char *const ck[PCL_PLAN_BUF_COUNT] = {"input_chunks", "output_chunks",
                                                     "scratch_chunks"};
  for (int t = 0; t < PCL_PLAN_BUF_COUNT; t++) {
    uint64_t n;
    if ((res = get_u64(c, o, ck[t], 1, 0, 0, MAX_CHUNKS, &n)) != ncclSuccess) return res;
    g->chunks[t] = (uint32_t)n;
  }
  if (g->chunks[0] == 0 && g->chunks[1] == 0)
    return pcl_plan_fail(c, "input_chunks", "input_chunks and output_chunks are both 0");

  if ((res = get_array(c, o, "channels", 0, 1024, "channel groups", &a)) != ncclSuccess) return res;
  if (a && (res = conv_channels(v, a)) != ncclSuccess) return res;
  if ((res = get_array(c, o, "remote_buffers", 0, MAX_RBUFS, "remote buffers", &a)) != ncclSuccess)
    return res;
  if (a && (res = conv_rbufs(v, a)) != ncclSuccess) return res;
  if ((res = get_array(c, o, "semaphores", 0, PCL_PLAN_MAX_SEMAPHORES, "semaphores", &a)) !=
      ncclSuccess)
    return res;
  if (a && a->u.array.len) {
    g->n_sems = (int)a->u.array.len;
    PCL_CALLOC(g->sem_init, g->n_sems, "plan semaphores");
    if (g->sem_init == NULL) return ncclSystemError;
    size_t p0 = pcl_plan_path_key(c, "semaphores");
    for (int i = 0; i < g->n_sems; i++) {
      size_t p1 = pcl_plan_path_idx(c, i);
      uint64_t iv;
      if ((res = need_object(c, a->u.array.values[i], NULL)) != ncclSuccess) return res;
      if ((res = check_keys(c, a->u.array.values[i], skeys)) != ncclSuccess) return res;
      if ((res = get_u64(c, a->u.array.values[i], "init_value", 1, 0, 0, 0x7fffffff, &iv)) !=
          ncclSuccess)
        return res;
      g->sem_init[i] = (uint32_t)iv;
      pcl_plan_path_pop(c, p1);
    }
    pcl_plan_path_pop(c, p0);
  }

  if ((res = get_array(c, o, "threadblocks", 1, PCL_PLAN_MAX_BLOCKS, "threadblocks", &a)) !=
      ncclSuccess)
    return res;
  g->n_blocks = (int)a->u.array.len;
  if (g->n_blocks) {
    PCL_CALLOC(g->blocks, g->n_blocks, "plan threadblocks");
    if (g->blocks == NULL) return ncclSystemError;
  }
  size_t p0 = pcl_plan_path_key(c, "threadblocks");
  for (int b = 0; b < g->n_blocks; b++) {
    size_t p1 = pcl_plan_path_idx(c, b);
    v->blk = &g->blocks[b];
    v->blk->id = b;
    if ((res = conv_block(v, a->u.array.values[b])) != ncclSuccess) return res;
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  if (g->n_blocks > v->plan->max_blocks) v->plan->max_blocks = g->n_blocks;
  if (g->chunks[PCL_PLAN_BUF_SCRATCH] > v->plan->max_scratch_chunks)
    v->plan->max_scratch_chunks = g->chunks[PCL_PLAN_BUF_SCRATCH];
  return ncclSuccess;
}

/* ---- Top level ----------------------------------------------------------------------------- */

static ncclResult_t conv_plan(pcl_plan_ctx_t *c, yajl_val root, pcl_plan_t *p) {
  static const char *const keys[] = {
      "name", "collective", "protocol", "inplace", "reuse_resources", "num_threads_per_block",
      "use_double_scratch_buffer", "buffer_alignment", "min_message_size", "max_message_size",
      "gpus", "nranks_per_node", "priority", "outofplace_ok", "version", NULL};
  ncclResult_t res;
  const char *s;
  uint64_t u;
  if (!YAJL_IS_OBJECT(root)) return pcl_plan_fail(c, NULL, "expected an object at the top level");
  if ((res = check_keys(c, root, keys)) != ncclSuccess) return res;
  if ((res = get_str(c, root, "name", 1, &s)) != ncclSuccess) return res;
  if (s[0] == '\0') return pcl_plan_fail(c, "name", "empty plan name");
  p->name = pcl_strdup(s, "plan name");
  if (p->name == NULL) return ncclSystemError;
  if ((res = get_str(c, root, "collective", 1, &s)) != ncclSuccess) return res;
  int coll = pcl_plan_coll_from_name(s);
  if (coll < 0) return pcl_plan_fail(c, "collective", "unknown collective '%s'", s);
  p->collective = (pcl_plan_coll_t)coll;
  if ((res = get_str(c, root, "protocol", 1, &s)) != ncclSuccess) return res;
  if (strcmp(s, "LL") == 0) p->protocol = PCL_PLAN_PROTO_LL;
  else if (strcmp(s, "Simple") == 0) p->protocol = PCL_PLAN_PROTO_SIMPLE;
  else return pcl_plan_fail(c, "protocol", "unknown protocol '%s' (expected LL or Simple)", s);
  if ((res = get_bool(c, root, "inplace", 1, 0, &p->inplace)) != ncclSuccess) return res;
  if ((res = get_bool(c, root, "outofplace_ok", 0, 0, &p->outofplace_ok)) != ncclSuccess) return res;
  if ((res = get_bool(c, root, "reuse_resources", 0, 0, &p->reuse_resources)) != ncclSuccess)
    return res;
  if ((res = get_bool(c, root, "use_double_scratch_buffer", 0, 0, &p->use_double_scratch_buffer)) !=
      ncclSuccess)
    return res;
  if ((res = get_int(c, root, "num_threads_per_block", 0, 1024, 32, PCL_PLAN_MAX_THREADS,
                     &p->num_threads_per_block)) != ncclSuccess)
    return res;
  if (p->num_threads_per_block % 32)
    return pcl_plan_fail(c, "num_threads_per_block", "%d is not a multiple of 32",
                         p->num_threads_per_block);
  if ((res = get_u64(c, root, "buffer_alignment", 0, 16, 1, 4096, &u)) != ncclSuccess) return res;
  if (u & (u - 1)) return pcl_plan_fail(c, "buffer_alignment", "%llu is not a power of two",
                                        (unsigned long long)u);
  if (u < (p->protocol == PCL_PLAN_PROTO_LL ? 8u : 4u))
    return pcl_plan_fail(c, "buffer_alignment", "%llu is below the minimum of %u for protocol %s",
                         (unsigned long long)u, p->protocol == PCL_PLAN_PROTO_LL ? 8u : 4u,
                         p->protocol == PCL_PLAN_PROTO_LL ? "LL" : "Simple");
  p->buffer_alignment = (uint32_t)u;
  if ((res = get_u64(c, root, "min_message_size", 0, 0, 0, UINT64_MAX, &p->min_message_size)) !=
      ncclSuccess)
    return res;
  if ((res = get_u64(c, root, "max_message_size", 0, UINT64_MAX, 0, UINT64_MAX,
                     &p->max_message_size)) != ncclSuccess)
    return res;
  if (p->min_message_size > p->max_message_size)
    return pcl_plan_fail(c, "min_message_size", "min_message_size %llu > max_message_size %llu",
                         (unsigned long long)p->min_message_size,
                         (unsigned long long)p->max_message_size);
  if ((res = get_int(c, root, "priority", 0, 0, -1000000, 1000000, &p->priority)) != ncclSuccess)
    return res;

  yajl_val gpus;
  if ((res = get_array(c, root, "gpus", 1, PCL_PLAN_MAX_GPUS, "gpus", &gpus)) != ncclSuccess)
    return res;
  if (gpus->u.array.len == 0) return pcl_plan_fail(c, "gpus", "a plan needs at least one gpu");
  p->n_gpus = (int)gpus->u.array.len;
  if ((res = get_int(c, root, "nranks_per_node", 0, p->n_gpus, 1, p->n_gpus, &p->nranks_per_node)) !=
      ncclSuccess)
    return res;
  if (p->n_gpus % p->nranks_per_node)
    return pcl_plan_fail(c, "nranks_per_node", "%d gpus do not split into nodes of %d",
                         p->n_gpus, p->nranks_per_node);
  PCL_CALLOC(p->gpus, p->n_gpus, "plan gpus");
  if (p->gpus == NULL) return ncclSystemError;
  conv_t v = {.c = c, .plan = p, .legacy = scan_legacy(root)};
  p->legacy_names = v.legacy;
  size_t p0 = pcl_plan_path_key(c, "gpus");
  for (int g = 0; g < p->n_gpus; g++) {
    size_t p1 = pcl_plan_path_idx(c, g);
    v.gpu = &p->gpus[g];
    v.gpu->id = g;
    if ((res = conv_gpu(&v, gpus->u.array.values[g])) != ncclSuccess) return res;
    pcl_plan_path_pop(c, p1);
    for (int b = 0; b < v.gpu->n_blocks; b++)
      for (int i = 0; i < v.gpu->blocks[b].n_ops; i++) {
        int ro = v.gpu->blocks[b].ops[i].reduce_op;
        if (ro != PCL_PLAN_RED_NONE && ro != PCL_PLAN_RED_AVG) p->reduce_ops_mask |= 1u << ro;
      }
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

/* yajl_tree frees recursively; refuse absurd nesting before parsing so neither yajl nor our
 * walkers can exhaust the stack. */
static int json_too_deep(const char *s, size_t len) {
  int depth = 0, in_str = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = 0;
    } else if (ch == '"') {
      in_str = 1;
    } else if (ch == '[' || ch == '{') {
      if (++depth > MAX_JSON_DEPTH) return 1;
    } else if (ch == ']' || ch == '}') {
      depth--;
    }
  }
  return 0;
}

void pcl_plan_destroy(pcl_plan_t *p) {
  if (p == NULL) return;
  for (int g = 0; p->gpus && g < p->n_gpus; g++) {
    pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int b = 0; gpu->blocks && b < gpu->n_blocks; b++) pcl_free(gpu->blocks[b].ops);
    pcl_free(gpu->blocks);
    for (int t = 0; t < 2; t++) pcl_free(gpu->channels[t]);
    for (int s = 0; gpu->switches && s < gpu->n_switch; s++) pcl_free(gpu->switches[s].ranks);
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
  char *text = NULL;
  yajl_val root = NULL;
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  if (json == NULL) return pcl_plan_fail(&c, NULL, "no plan text");
  if (json_too_deep(json, len)) return pcl_plan_fail(&c, NULL, "JSON nested deeper than %d levels",
                                                     MAX_JSON_DEPTH);
  /* yajl_tree_parse wants a NUL-terminated string; an embedded NUL would hide the rest. */
  if (memchr(json, '\0', len) != NULL) return pcl_plan_fail(&c, NULL, "NUL byte in JSON text");
  text = pcl_calloc(len + 1, 1, "plan json text");
  if (text == NULL) return ncclSystemError;
  memcpy(text, json, len);
  char yerr[256] = "";
  root = yajl_tree_parse(text, yerr, sizeof(yerr));
  if (root == NULL) {
    /* yajl's message spans lines; keep the first one. */
    char *nl = strchr(yerr, '\n');
    if (nl) *nl = '\0';
    res = pcl_plan_fail(&c, NULL, "invalid JSON: %s", yerr[0] ? yerr : "parse error");
    goto out;
  }
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
  if (res == ncclSuccess) res = pcl_plan_validate(p, &c);
  if (res == ncclSuccess && c.failed) res = ncclInvalidArgument;
  if (res == ncclSystemError && err && errlen && !c.failed)
    snprintf(err, errlen, "%s: out of memory", c.file);
out:
  if (root) yajl_tree_free(root);
  pcl_free(text);
  if (res != ncclSuccess) {
    pcl_plan_destroy(p);
    PCL_INFO(PCL_LOG_PLAN, "plan refused: %s", err ? err : c.file);
    return res;
  }
  *out = p;
  return ncclSuccess;
}

ncclResult_t pcl_plan_load(const char *path, pcl_plan_t **out, char *err, size_t errlen) {
  ncclResult_t res = ncclSuccess;
  char *buf = NULL;
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    if (err && errlen) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return ncclSystemError;
  }
  size_t cap = 0, len = 0;
  for (;;) {
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 65536;
      if (ncap > MAX_FILE_BYTES + 1) ncap = MAX_FILE_BYTES + 1;
      if (ncap == cap) {
        if (err && errlen) snprintf(err, errlen, "%s: file larger than %u bytes", path, MAX_FILE_BYTES);
        res = ncclInvalidArgument;
        goto out;
      }
      char *nb = pcl_realloc(buf, cap, ncap, 1, "plan file");
      if (nb == NULL) {
        res = ncclSystemError;
        goto out;
      }
      buf = nb;
      cap = ncap;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  if (ferror(f)) {
    if (err && errlen) snprintf(err, errlen, "%s: read error", path);
    res = ncclSystemError;
    goto out;
  }
  res = pcl_plan_load_buffer(path, buf, len, out, err, errlen);
out:
  fclose(f);
  pcl_free(buf);
  return res;
}
