/* SPDX-License-Identifier: MIT
 * The plan loader's op conversion: buffer references, ops (nested pipelines included) and
 * threadblocks, each checked for type, range and reference on the way. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "plan_json_int.h"

static ncclResult_t conv_ref(pcl_plan_conv_t *v, yajl_val r, pcl_plan_op_t *op,
                             pcl_plan_ref_t *ref) {
  static const char *const keys[] = {"type",  "buffer_id", "switch_channel_id",
                                     "index", "size",      NULL};
  pcl_plan_ctx_t *c = v->c;
  PCL_TRY(pcl_json_need_object(c, r, NULL));
  PCL_TRY(pcl_json_check_keys(c, r, keys));
  yajl_val t = pcl_json_get(r, "type"), b = pcl_json_get(r, "buffer_id"),
           s = pcl_json_get(r, "switch_channel_id");
  int nkinds = (t != NULL) + (b != NULL) + (s != NULL);
  if (nkinds != 1)
    return pcl_plan_fail(c, NULL,
                         "a buffer reference needs exactly one of type, buffer_id, "
                         "switch_channel_id");
  uint64_t index, size, slot;
  PCL_TRY(pcl_json_u64(c, r, "index", 1, 0, 0, PCL_PLAN_JSON_MAX_CHUNKS, &index));
  PCL_TRY(pcl_json_u64(c, r, "size", 1, 0, 1, PCL_PLAN_JSON_MAX_CHUNKS, &size));
  ref->index = (uint32_t)index;
  ref->size = (uint32_t)size;
  ref->rbuf = -1;
  if (t) {
    const char *ts;
    PCL_TRY(pcl_json_str(c, r, "type", 1, &ts));
    int bt = pcl_plan_buf_from_name(ts);
    if (bt < 0)
      return pcl_plan_fail(c, "type", "unknown buffer type '%s' (expected i, o or s)", ts);
    ref->kind = PCL_PLAN_REF_LOCAL;
    ref->type = (uint8_t)bt;
    ref->rank = v->gpu->id;
    ref->slot = 0;
  } else if (b) {
    PCL_TRY(pcl_json_u64(c, r, "buffer_id", 1, 0, 0, 65535, &slot));
    int ct = op->channel_type;
    if (ct != PCL_PLAN_CHAN_MEMORY && ct != PCL_PLAN_CHAN_PORT)
      return pcl_plan_fail(c, "buffer_id",
                           "remote buffer reference on an op whose channel_type "
                           "is %s (needs memory or port)",
                           pcl_plan_chan_name(ct));
    if ((int)slot >= v->blk->n_rbufs[ct])
      return pcl_plan_fail(c, "buffer_id",
                           "remote buffer slot %d out of range [0, %d) of the "
                           "threadblock's %s remote_buffer_refs",
                           (int)slot, v->blk->n_rbufs[ct], pcl_plan_chan_name(ct));
    int rb = v->blk->rbufs[ct][slot];
    ref->kind = PCL_PLAN_REF_REMOTE;
    ref->slot = (uint16_t)slot;
    ref->rbuf = rb;
    ref->type = v->gpu->rbufs[rb].type;
    ref->rank = v->gpu->rbufs[rb].rank;
  } else {
    PCL_TRY(pcl_json_u64(c, r, "switch_channel_id", 1, 0, 0, 65535, &slot));
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

static ncclResult_t conv_refs(pcl_plan_conv_t *v, yajl_val o, const char *key, pcl_plan_op_t *op,
                              pcl_plan_ref_t *refs, uint8_t *n) {
  pcl_plan_ctx_t *c = v->c;
  yajl_val a;
  ncclResult_t res = pcl_json_array(c, o, key, 0, PCL_PLAN_MAX_OP_BUFS, "buffer references", &a);
  if (res != ncclSuccess || a == NULL)
    return res;
  size_t p0 = pcl_plan_path_key(c, key);
  int nremote = 0;
  for (size_t i = 0; i < a->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    PCL_TRY(conv_ref(v, a->u.array.values[i], op, &refs[i]));
    if (refs[i].kind != PCL_PLAN_REF_LOCAL)
      nremote++;
    pcl_plan_path_pop(c, p1);
    /* The total per side (PCL_PLAN_MAX_OP_BUFS) is the device limit; remote refs are capped
     * apart, since reduce-packet ops legitimately read 1 + (n-1) local scratch slots. */
    if (nremote > PCL_PLAN_MAX_OP_REMOTE_BUFS)
      return pcl_plan_fail(c, NULL, "more than %d remote buffer references",
                           PCL_PLAN_MAX_OP_REMOTE_BUFS);
  }
  *n = (uint8_t)a->u.array.len;
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

/* name, channel_type and reduce_op. No reduce_op means "the call's op" (docs/architecture.md,
 * "Plans"): only an explicit one constrains the plan. */
static ncclResult_t conv_op_kind(pcl_plan_conv_t *v, yajl_val o, pcl_plan_op_t *op) {
  pcl_plan_ctx_t *c = v->c;
  const char *s;
  PCL_TRY(pcl_json_str(c, o, "name", 1, &s));
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
  PCL_TRY(pcl_json_str(c, o, "channel_type", 0, &s));
  if (s) {
    int ct = pcl_plan_chan_from_name(s, NULL);
    if (ct < 0)
      return pcl_plan_fail(c, "channel_type", "unknown channel type '%s'", s);
    op->channel_type = (uint8_t)ct;
  }
  PCL_TRY(pcl_json_str(c, o, "reduce_op", 0, &s));
  int r = s ? pcl_plan_red_from_name(s) : PCL_PLAN_RED_NONE;
  if (r < 0)
    return pcl_plan_fail(c, "reduce_op", "unknown reduce_op '%s'", s);
  if (pcl_plan_op_is_reduce(t))
    op->reduce_op = (uint8_t)r;
  return ncclSuccess;
}

/* channel_ids: block-local channel slots of the op's channel type, each once. */
static ncclResult_t conv_op_channels(pcl_plan_conv_t *v, yajl_val o, pcl_plan_op_t *op) {
  pcl_plan_ctx_t *c = v->c;
  yajl_val a;
  PCL_TRY(pcl_json_array(c, o, "channel_ids", 0, PCL_PLAN_MAX_OP_CHANNELS, "channel ids", &a));
  if (!a || a->u.array.len == 0)
    return ncclSuccess;
  int ct = op->channel_type;
  if (ct == PCL_PLAN_CHAN_NONE)
    return pcl_plan_fail(c, "channel_ids", "channel_ids given but the op has no channel_type");
  size_t p0 = pcl_plan_path_key(c, "channel_ids");
  for (size_t i = 0; i < a->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    long long id;
    PCL_TRY(pcl_json_elem_index(c, a->u.array.values[i], &id));
    if (id >= v->blk->n_channels[ct])
      return pcl_plan_fail(c, NULL,
                           "channel slot %lld out of range [0, %d) of the threadblock's %s "
                           "channels",
                           id, v->blk->n_channels[ct], pcl_plan_chan_name(ct));
    for (size_t j = 0; j < i; j++)
      if (op->channels[j] == id)
        return pcl_plan_fail(c, NULL, "channel slot %lld repeated", id);
    op->channels[i] = (uint16_t)id;
    op->gpu_channels[i] = v->blk->channels[ct][id];
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  op->n_channels = (uint8_t)a->u.array.len;
  return ncclSuccess;
}

/* tbg_info, barrier_id, num_threadblocks and semaphore_ids. */
static ncclResult_t conv_op_sync(pcl_plan_conv_t *v, yajl_val o, pcl_plan_op_t *op) {
  static const char *const tkeys[] = {"tb_id", "tbg_size", NULL};
  pcl_plan_ctx_t *c = v->c;
  yajl_val tbg = pcl_json_get(o, "tbg_info"), a;
  if (tbg) {
    size_t p0 = pcl_plan_path_key(c, "tbg_info");
    uint64_t id, size;
    PCL_TRY(pcl_json_need_object(c, tbg, NULL));
    PCL_TRY(pcl_json_check_keys(c, tbg, tkeys));
    PCL_TRY(pcl_json_u64(c, tbg, "tbg_size", 1, 1, 1, PCL_PLAN_MAX_BLOCKS, &size));
    PCL_TRY(pcl_json_u64(c, tbg, "tb_id", 1, 0, 0, size - 1, &id));
    op->tbg_id = (uint16_t)id;
    op->tbg_size = (uint16_t)size;
    pcl_plan_path_pop(c, p0);
  }
  int x;
  PCL_TRY(pcl_json_int(c, o, "barrier_id", 0, -1, 0, PCL_PLAN_MAX_BARRIERS - 1, &x));
  op->barrier_id = (int16_t)x;
  PCL_TRY(pcl_json_int(c, o, "num_threadblocks", 0, 0, 1, PCL_PLAN_MAX_BLOCKS, &x));
  op->num_threadblocks = (uint16_t)x;
  PCL_TRY(pcl_json_array(c, o, "semaphore_ids", 0, PCL_PLAN_MAX_OP_SEMS, "semaphore ids", &a));
  if (!a)
    return ncclSuccess;
  size_t p0 = pcl_plan_path_key(c, "semaphore_ids");
  for (size_t i = 0; i < a->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    long long id;
    PCL_TRY(pcl_json_elem_index(c, a->u.array.values[i], &id));
    if (id >= v->gpu->n_sems)
      return pcl_plan_fail(c, NULL, "semaphore %lld out of range [0, %d) of the gpu's semaphores",
                           id, v->gpu->n_sems);
    op->sem_ids[i] = (uint16_t)id;
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  op->n_sems = (uint8_t)a->u.array.len;
  return ncclSuccess;
}

/* iter_context and the nested ops, which only a (top-level) pipeline op takes. */
static ncclResult_t conv_op_pipeline(pcl_plan_conv_t *v, yajl_val o, pcl_plan_op_t *op,
                                     int nested) {
  static const char *const ikeys[] = {"unit_size", "num_chunks", NULL};
  pcl_plan_ctx_t *c = v->c;
  yajl_val ic = pcl_json_get(o, "iter_context"), a;
  if (ic) {
    size_t p0 = pcl_plan_path_key(c, "iter_context");
    uint64_t u, n;
    PCL_TRY(pcl_json_need_object(c, ic, NULL));
    PCL_TRY(pcl_json_check_keys(c, ic, ikeys));
    PCL_TRY(pcl_json_u64(c, ic, "unit_size", 1, 0, 1, 0xffffffffu, &u));
    PCL_TRY(pcl_json_u64(c, ic, "num_chunks", 1, 0, 1, PCL_PLAN_JSON_MAX_CHUNKS, &n));
    op->unit_size = (uint32_t)u;
    op->num_chunks = (uint32_t)n;
    pcl_plan_path_pop(c, p0);
  }
  if (op->type != PCL_PLAN_OP_PIPELINE) {
    if (ic)
      return pcl_plan_fail(c, "iter_context", "only a pipeline op takes iter_context");
    if (pcl_json_get(o, "ops"))
      return pcl_plan_fail(c, "ops", "only a pipeline op takes nested ops");
    return ncclSuccess;
  }
  if (nested)
    return pcl_plan_fail(c, "name", "pipelines cannot be nested");
  if (!ic)
    return pcl_plan_fail(c, "iter_context", "pipeline op needs iter_context");
  PCL_TRY(pcl_json_array(c, o, "ops", 1, PCL_PLAN_MAX_OPS_PER_BLOCK, "ops", &a));
  if (a->u.array.len == 0)
    return pcl_plan_fail(c, "ops", "pipeline op with no inner ops");
  return ncclSuccess;
}

static ncclResult_t conv_op(pcl_plan_conv_t *v, yajl_val o, pcl_plan_op_t *op, int nested) {
  static const char *const keys[] = {
      "name",       "channel_type",     "channel_ids",   "src_buff",     "dst_buff", "tbg_info",
      "barrier_id", "num_threadblocks", "semaphore_ids", "iter_context", "ops",      "reduce_op",
      NULL};
  PCL_TRY(pcl_json_need_object(v->c, o, NULL));
  PCL_TRY(pcl_json_check_keys(v->c, o, keys));
  PCL_TRY(conv_op_kind(v, o, op));
  PCL_TRY(conv_op_channels(v, o, op));
  PCL_TRY(conv_refs(v, o, "src_buff", op, op->src, &op->n_src));
  PCL_TRY(conv_refs(v, o, "dst_buff", op, op->dst, &op->n_dst));
  PCL_TRY(conv_op_sync(v, o, op));
  return conv_op_pipeline(v, o, op, nested);
}

static ncclResult_t conv_ops(pcl_plan_conv_t *v, yajl_val ops) {
  pcl_plan_ctx_t *c = v->c;
  size_t total = 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    yajl_val inner = pcl_json_get(ops->u.array.values[i], "ops");
    total += 1 + (YAJL_IS_ARRAY(inner) ? inner->u.array.len : 0);
  }
  if (total > PCL_PLAN_MAX_OPS_PER_BLOCK)
    return pcl_plan_fail(c, "ops",
                         "%zu ops (pipeline inner ops included) exceed the limit of %d "
                         "per threadblock",
                         total, PCL_PLAN_MAX_OPS_PER_BLOCK);
  if (total == 0)
    return ncclSuccess;
  PCL_CALLOC(v->blk->ops, total, "plan ops");
  if (v->blk->ops == NULL)
    return ncclSystemError;
  size_t p0 = pcl_plan_path_key(c, "ops");
  int k = 0;
  for (size_t i = 0; i < ops->u.array.len; i++) {
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    pcl_plan_op_t *op = &v->blk->ops[k++];
    PCL_TRY(conv_op(v, ops->u.array.values[i], op, 0));
    if (op->type == PCL_PLAN_OP_PIPELINE) {
      yajl_val inner = pcl_json_get(ops->u.array.values[i], "ops");
      size_t p2 = pcl_plan_path_key(c, "ops");
      for (size_t j = 0; j < inner->u.array.len; j++) {
        size_t p3 = pcl_plan_path_idx(c, (int)j);
        pcl_plan_op_t *iop = &v->blk->ops[k++];
        PCL_TRY(conv_op(v, inner->u.array.values[j], iop, 1));
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

/* A threadblock's id groups ("channels" / "remote_buffer_refs"): an array of objects, each with
 * a channel type and a list of ids that `add` checks and appends. */
typedef struct {
  const char *key, *type_key, *ids_key; /* JSON names */
  const char *const *keys;              /* allowed fields of a group */
  size_t max_ids;
  const char *what, *ids_what;                                   /* for messages */
  const char *(*bad_type)(int ct);                               /* NULL when ct is acceptable */
  ncclResult_t (*add)(pcl_plan_conv_t *v, int ct, long long id); /* at the id's JSON path */
} id_groups_t;

static const char *bad_chan_type(int ct) {
  return ct < 0 || ct == PCL_PLAN_CHAN_NONE ? "unknown channel type '%s'" : NULL;
}

static const char *bad_access_type(int ct) {
  return ct != PCL_PLAN_CHAN_MEMORY && ct != PCL_PLAN_CHAN_PORT
             ? "remote buffers are accessed through memory or port channels, not '%s'"
             : NULL;
}

static ncclResult_t add_channel(pcl_plan_conv_t *v, int ct, long long id) {
  pcl_plan_block_t *b = v->blk;
  int ngpu = ct == PCL_PLAN_CHAN_SWITCH ? v->gpu->n_switch : v->gpu->n_channels[ct];
  if (id >= ngpu)
    return pcl_plan_fail(v->c, NULL, "%s channel %lld out of range [0, %d) of the gpu's channels",
                         pcl_plan_chan_name(ct), id, ngpu);
  if (b->n_channels[ct] >= PCL_PLAN_MAX_BLOCK_CHANNELS)
    return pcl_plan_fail(v->c, NULL, "more than %d %s channels in one threadblock",
                         PCL_PLAN_MAX_BLOCK_CHANNELS, pcl_plan_chan_name(ct));
  b->channels[ct][b->n_channels[ct]++] = (int16_t)id;
  return ncclSuccess;
}

static ncclResult_t add_rbuf(pcl_plan_conv_t *v, int ct, long long rb) {
  pcl_plan_block_t *b = v->blk;
  if (rb >= v->gpu->n_rbufs)
    return pcl_plan_fail(v->c, NULL,
                         "remote buffer %lld out of range [0, %d) of the gpu's remote_buffers", rb,
                         v->gpu->n_rbufs);
  if (!(v->gpu->rbufs[rb].access & (1u << ct)))
    return pcl_plan_fail(v->c, NULL,
                         "remote buffer %lld is not accessible through %s channels (see its "
                         "access_channel_types)",
                         rb, pcl_plan_chan_name(ct));
  if (b->n_rbufs[ct] >= PCL_PLAN_MAX_BLOCK_RBUFS)
    return pcl_plan_fail(v->c, NULL, "more than %d %s remote buffer slots in one threadblock",
                         PCL_PLAN_MAX_BLOCK_RBUFS, pcl_plan_chan_name(ct));
  b->rbufs[ct][b->n_rbufs[ct]++] = (int16_t)rb;
  return ncclSuccess;
}

static ncclResult_t conv_id_groups(pcl_plan_conv_t *v, yajl_val o, const id_groups_t *g) {
  pcl_plan_ctx_t *c = v->c;
  yajl_val a;
  const char *s;
  PCL_TRY(pcl_json_array(c, o, g->key, 0, 64, g->what, &a));
  size_t p0 = pcl_plan_path_key(c, g->key);
  for (size_t i = 0; a && i < a->u.array.len; i++) {
    yajl_val grp = a->u.array.values[i], ids;
    size_t p1 = pcl_plan_path_idx(c, (int)i);
    PCL_TRY(pcl_json_need_object(c, grp, NULL));
    PCL_TRY(pcl_json_check_keys(c, grp, g->keys));
    PCL_TRY(pcl_json_str(c, grp, g->type_key, 1, &s));
    int ct = pcl_plan_chan_from_name(s, NULL);
    const char *bad = g->bad_type(ct);
    if (bad != NULL)
      return pcl_plan_fail(c, g->type_key, bad, s);
    PCL_TRY(pcl_json_array(c, grp, g->ids_key, 1, g->max_ids, g->ids_what, &ids));
    size_t p2 = pcl_plan_path_key(c, g->ids_key);
    for (size_t j = 0; j < ids->u.array.len; j++) {
      yajl_val e = ids->u.array.values[j];
      size_t p3 = pcl_plan_path_idx(c, (int)j);
      long long id;
      PCL_TRY(pcl_json_elem_index(c, e, &id));
      PCL_TRY(g->add(v, ct, id));
      pcl_plan_path_pop(c, p3);
    }
    pcl_plan_path_pop(c, p2);
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

ncclResult_t pcl_plan_conv_block(pcl_plan_conv_t *v, yajl_val o) {
  static const char *const keys[] = {"id", "ops", "channels", "remote_buffer_refs", NULL};
  static const char *const ckeys[] = {"channel_type", "channel_ids", "buff", NULL};
  static const char *const rkeys[] = {"access_channel_type", "remote_buffer_ids", NULL};
  static const id_groups_t chans = {.key = "channels",
                                    .type_key = "channel_type",
                                    .ids_key = "channel_ids",
                                    .keys = ckeys,
                                    .max_ids = PCL_PLAN_MAX_BLOCK_CHANNELS,
                                    .what = "channel groups",
                                    .ids_what = "channel ids",
                                    .bad_type = bad_chan_type,
                                    .add = add_channel};
  static const id_groups_t rbufs = {.key = "remote_buffer_refs",
                                    .type_key = "access_channel_type",
                                    .ids_key = "remote_buffer_ids",
                                    .keys = rkeys,
                                    .max_ids = PCL_PLAN_MAX_BLOCK_RBUFS,
                                    .what = "remote buffer groups",
                                    .ids_what = "remote buffer ids",
                                    .bad_type = bad_access_type,
                                    .add = add_rbuf};
  pcl_plan_ctx_t *c = v->c;
  yajl_val a;
  PCL_TRY(pcl_json_need_object(c, o, NULL));
  PCL_TRY(pcl_json_check_keys(c, o, keys));
  int id;
  PCL_TRY(pcl_json_int(c, o, "id", 1, 0, 0, 1 << 30, &id));
  if (id != v->blk->id)
    return pcl_plan_fail(c, "id", "threadblock id %d does not match its position %d", id,
                         v->blk->id);
  PCL_TRY(conv_id_groups(v, o, &chans));
  PCL_TRY(conv_id_groups(v, o, &rbufs));
  PCL_TRY(pcl_json_array(c, o, "ops", 1, PCL_PLAN_MAX_OPS_PER_BLOCK, "ops", &a));
  return conv_ops(v, a);
}
