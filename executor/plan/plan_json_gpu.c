/* SPDX-License-Identifier: MIT
 * The plan loader's per-gpu conversion: chunk counts, channels (with their peers and switch
 * groups), remote buffers, and the gpu's threadblocks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "plan_json_int.h"

/* One memory or port channel group: its peers (pass 0 counts them, pass 1 fills them in). */
static ncclResult_t conv_peer_channels(pcl_plan_conv_t *v, yajl_val e, int ct, const char *name,
                                       int pass, int *count, int *fill) {
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  yajl_val l;
  PCL_TRY(pcl_json_array(c, e, "connected_to", 1, PCL_PLAN_JSON_MAX_CHANNELS, "peers", &l));
  size_t p2 = pcl_plan_path_key(c, "connected_to");
  for (size_t j = 0; j < l->u.array.len; j++) {
    yajl_val p = l->u.array.values[j];
    size_t p3 = pcl_plan_path_idx(c, (int)j);
    if (!YAJL_IS_INTEGER(p) || YAJL_GET_INTEGER(p) < 0 || YAJL_GET_INTEGER(p) >= v->plan->n_gpus)
      return pcl_plan_fail(c, NULL, "peer must be a rank in [0, %d)", v->plan->n_gpus);
    if (YAJL_GET_INTEGER(p) == g->id)
      return pcl_plan_fail(c, NULL, "a channel cannot connect rank %d to itself", g->id);
    if (pass == 0 && ++count[ct] > PCL_PLAN_JSON_MAX_CHANNELS)
      return pcl_plan_fail(c, NULL, "more than %d %s channels", PCL_PLAN_JSON_MAX_CHANNELS, name);
    if (pass == 1) {
      g->channels[ct][fill[ct]].peer = (int32_t)YAJL_GET_INTEGER(p);
      g->channels[ct][fill[ct]].peer_channel = -1;
      fill[ct]++;
    }
    pcl_plan_path_pop(c, p3);
  }
  pcl_plan_path_pop(c, p2);
  return ncclSuccess;
}

/* One switch (NVLS) channel group: parsed so that the validator can refuse it by name. */
static ncclResult_t conv_switch_channels(pcl_plan_conv_t *v, yajl_val e, int pass, int *count,
                                         int *fill) {
  static const char *const gkeys[] = {"size", "ranks", NULL};
  pcl_plan_ctx_t *c = v->c;
  const int ct = PCL_PLAN_CHAN_SWITCH;
  const char *bs = NULL;
  yajl_val l;
  PCL_TRY(pcl_json_str(c, e, "buffer_type", 0, &bs));
  if (bs == NULL)
    PCL_TRY(pcl_json_str(c, e, "buff", 0, &bs));
  int bt = bs ? pcl_plan_buf_from_name(bs) : -1;
  if (bt < 0)
    return pcl_plan_fail(c, "buffer_type", "switch channel needs buffer_type i, o or s");
  PCL_TRY(pcl_json_array(c, e, "rank_groups", 1, 64, "rank groups", &l));
  size_t p2 = pcl_plan_path_key(c, "rank_groups");
  for (size_t j = 0; j < l->u.array.len; j++) {
    yajl_val rg = l->u.array.values[j], ranks;
    size_t p3 = pcl_plan_path_idx(c, (int)j);
    uint64_t size;
    PCL_TRY(pcl_json_need_object(c, rg, NULL));
    PCL_TRY(pcl_json_check_keys(c, rg, gkeys));
    PCL_TRY(pcl_json_u64(c, rg, "size", 1, 0, 0, PCL_PLAN_JSON_MAX_CHUNKS, &size));
    PCL_TRY(pcl_json_array(c, rg, "ranks", 1, PCL_PLAN_MAX_GPUS, "ranks", &ranks));
    for (size_t k = 0; k < ranks->u.array.len; k++) {
      yajl_val r = ranks->u.array.values[k];
      if (!YAJL_IS_INTEGER(r) || YAJL_GET_INTEGER(r) < 0 || YAJL_GET_INTEGER(r) >= v->plan->n_gpus)
        return pcl_plan_fail(c, "ranks", "rank must be in [0, %d)", v->plan->n_gpus);
    }
    if (pass == 0 && ++count[ct] > 64)
      return pcl_plan_fail(c, NULL, "more than 64 switch channels");
    if (pass == 1) {
      pcl_plan_switch_t *sw = &v->gpu->switches[fill[ct]++];
      sw->buffer_type = (uint8_t)bt;
      sw->size = (uint32_t)size;
      sw->n_ranks = (int)ranks->u.array.len;
      if (sw->n_ranks) {
        PCL_CALLOC(sw->ranks, sw->n_ranks, "plan switch ranks");
        if (sw->ranks == NULL)
          return ncclSystemError;
        for (int k = 0; k < sw->n_ranks; k++)
          sw->ranks[k] = (int32_t)YAJL_GET_INTEGER(ranks->u.array.values[k]);
      }
    }
    pcl_plan_path_pop(c, p3);
  }
  pcl_plan_path_pop(c, p2);
  return ncclSuccess;
}

/* After the counting pass: the gpu's channel arrays, sized exactly. */
static ncclResult_t alloc_channels(pcl_plan_gpu_t *g, const int *count) {
  for (int t = 0; t < 2; t++) {
    g->n_channels[t] = count[t];
    if (count[t]) {
      PCL_CALLOC(g->channels[t], count[t], "plan channels");
      if (g->channels[t] == NULL)
        return ncclSystemError;
    }
  }
  g->n_switch = count[PCL_PLAN_CHAN_SWITCH];
  if (g->n_switch) {
    PCL_CALLOC(g->switches, g->n_switch, "plan switch channels");
    if (g->switches == NULL)
      return ncclSystemError;
  }
  return ncclSuccess;
}

/* The gpu's "channels" groups, in two passes: validate and count, then fill. */
static ncclResult_t conv_channels(pcl_plan_conv_t *v, yajl_val a) {
  static const char *const keys[] = {"channel_type", "connected_to", "buffer_type",
                                     "buff",         "rank_groups",  NULL};
  pcl_plan_ctx_t *c = v->c;
  const char *s;
  int count[PCL_PLAN_CHAN_COUNT] = {0};
  size_t p0 = pcl_plan_path_key(c, "channels");
  for (int pass = 0; pass < 2; pass++) {
    int fill[PCL_PLAN_CHAN_COUNT] = {0};
    for (size_t i = 0; i < a->u.array.len; i++) {
      yajl_val e = a->u.array.values[i];
      size_t p1 = pcl_plan_path_idx(c, (int)i);
      PCL_TRY(pcl_json_need_object(c, e, NULL));
      PCL_TRY(pcl_json_check_keys(c, e, keys));
      PCL_TRY(pcl_json_str(c, e, "channel_type", 1, &s));
      int ct = pcl_plan_chan_from_name(s, NULL);
      if (ct < 0 || ct == PCL_PLAN_CHAN_NONE)
        return pcl_plan_fail(c, "channel_type", "unknown channel type '%s'", s);
      if (ct != PCL_PLAN_CHAN_SWITCH)
        PCL_TRY(conv_peer_channels(v, e, ct, s, pass, count, fill));
      else
        PCL_TRY(conv_switch_channels(v, e, pass, count, fill));
      pcl_plan_path_pop(c, p1);
    }
    if (pass == 0)
      PCL_TRY(alloc_channels(v->gpu, count));
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_rbufs(pcl_plan_conv_t *v, yajl_val a) {
  static const char *const keys[] = {"rank", "type", "access_channel_types", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  const char *s;
  g->n_rbufs = (int)a->u.array.len;
  if (g->n_rbufs) {
    PCL_CALLOC(g->rbufs, g->n_rbufs, "plan remote buffers");
    if (g->rbufs == NULL)
      return ncclSystemError;
  }
  size_t p0 = pcl_plan_path_key(c, "remote_buffers");
  for (int i = 0; i < g->n_rbufs; i++) {
    yajl_val e = a->u.array.values[i], acc;
    size_t p1 = pcl_plan_path_idx(c, i);
    int rank;
    PCL_TRY(pcl_json_need_object(c, e, NULL));
    PCL_TRY(pcl_json_check_keys(c, e, keys));
    PCL_TRY(pcl_json_int(c, e, "rank", 1, 0, 0, v->plan->n_gpus - 1, &rank));
    if (rank == g->id)
      return pcl_plan_fail(c, "rank", "a remote buffer must belong to another rank (got %d)", rank);
    PCL_TRY(pcl_json_str(c, e, "type", 1, &s));
    int bt = pcl_plan_buf_from_name(s);
    if (bt < 0)
      return pcl_plan_fail(c, "type", "unknown buffer type '%s' (expected i, o or s)", s);
    PCL_TRY(pcl_json_array(c, e, "access_channel_types", 1, 4, "channel types", &acc));
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

/* The gpu's device semaphores and their initial values. */
static ncclResult_t conv_sems(pcl_plan_conv_t *v, yajl_val a) {
  static const char *const skeys[] = {"init_value", NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  g->n_sems = (int)a->u.array.len;
  PCL_CALLOC(g->sem_init, g->n_sems, "plan semaphores");
  if (g->sem_init == NULL)
    return ncclSystemError;
  size_t p0 = pcl_plan_path_key(c, "semaphores");
  for (int i = 0; i < g->n_sems; i++) {
    size_t p1 = pcl_plan_path_idx(c, i);
    uint64_t iv;
    PCL_TRY(pcl_json_need_object(c, a->u.array.values[i], NULL));
    PCL_TRY(pcl_json_check_keys(c, a->u.array.values[i], skeys));
    PCL_TRY(pcl_json_u64(c, a->u.array.values[i], "init_value", 1, 0, 0, 0x7fffffff, &iv));
    g->sem_init[i] = (uint32_t)iv;
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

/* The gpu's threadblocks, each converted by pcl_plan_conv_block. */
static ncclResult_t conv_blocks(pcl_plan_conv_t *v, yajl_val a) {
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  g->n_blocks = (int)a->u.array.len;
  if (g->n_blocks) {
    PCL_CALLOC(g->blocks, g->n_blocks, "plan threadblocks");
    if (g->blocks == NULL)
      return ncclSystemError;
  }
  size_t p0 = pcl_plan_path_key(c, "threadblocks");
  for (int b = 0; b < g->n_blocks; b++) {
    size_t p1 = pcl_plan_path_idx(c, b);
    v->blk = &g->blocks[b];
    v->blk->id = b;
    PCL_TRY(pcl_plan_conv_block(v, a->u.array.values[b]));
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

ncclResult_t pcl_plan_conv_gpu(pcl_plan_conv_t *v, yajl_val o) {
  static const char *const keys[] = {
      "id",       "input_chunks",   "output_chunks", "scratch_chunks",
      "channels", "remote_buffers", "semaphores",    "threadblocks",
      NULL};
  pcl_plan_ctx_t *c = v->c;
  pcl_plan_gpu_t *g = v->gpu;
  yajl_val a;
  int id;
  PCL_TRY(pcl_json_need_object(c, o, NULL));
  PCL_TRY(pcl_json_check_keys(c, o, keys));
  PCL_TRY(pcl_json_int(c, o, "id", 1, 0, 0, 1 << 30, &id));
  if (id != g->id)
    return pcl_plan_fail(c, "id", "gpus[%d].id is %d: gpus must be listed by rank", g->id, id);
  static const char *const ck[PCL_PLAN_BUF_COUNT] = {"input_chunks", "output_chunks",
                                                     "scratch_chunks"};
  for (int t = 0; t < PCL_PLAN_BUF_COUNT; t++) {
    uint64_t n;
    PCL_TRY(pcl_json_u64(c, o, ck[t], 1, 0, 0, PCL_PLAN_JSON_MAX_CHUNKS, &n));
    g->chunks[t] = (uint32_t)n;
  }
  if (g->chunks[0] == 0 && g->chunks[1] == 0)
    return pcl_plan_fail(c, "input_chunks", "input_chunks and output_chunks are both 0");

  PCL_TRY(pcl_json_array(c, o, "channels", 0, 1024, "channel groups", &a));
  if (a)
    PCL_TRY(conv_channels(v, a));
  PCL_TRY(pcl_json_array(c, o, "remote_buffers", 0, PCL_PLAN_JSON_MAX_RBUFS, "remote buffers", &a));
  if (a)
    PCL_TRY(conv_rbufs(v, a));
  PCL_TRY(pcl_json_array(c, o, "semaphores", 0, PCL_PLAN_MAX_SEMAPHORES, "semaphores", &a));
  if (a && a->u.array.len)
    PCL_TRY(conv_sems(v, a));
  PCL_TRY(pcl_json_array(c, o, "threadblocks", 1, PCL_PLAN_MAX_BLOCKS, "threadblocks", &a));
  PCL_TRY(conv_blocks(v, a));
  if (g->n_blocks > v->plan->max_blocks)
    v->plan->max_blocks = g->n_blocks;
  if (g->chunks[PCL_PLAN_BUF_SCRATCH] > v->plan->max_scratch_chunks)
    v->plan->max_scratch_chunks = g->chunks[PCL_PLAN_BUF_SCRATCH];
  return ncclSuccess;
}
