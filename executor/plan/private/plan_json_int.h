/* SPDX-License-Identifier: MIT
 * Private to the plan loader (plan_json*.c, the only yajl users): typed JSON field accessors that
 * fail with the JSON path, the conversion state, and the per-gpu / per-block converters. */
#ifndef PCL_PLAN_JSON_INT_H
#define PCL_PLAN_JSON_INT_H
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>
#include "plan_int.h"

#define PCL_PLAN_JSON_MAX_CHUNKS (1u << 24)
#define PCL_PLAN_JSON_MAX_CHANNELS 4096
#define PCL_PLAN_JSON_MAX_RBUFS 4096

/* ---- accessors (plan_json_get.c); each failure goes through pcl_plan_fail ---- */
const char *pcl_json_type_name(yajl_val v);
/* Member `key` of object o, or NULL (o may be anything). */
yajl_val pcl_json_get(yajl_val o, const char *key);
/* Refuses unknown and duplicate keys. Keys starting with '_' are comments and ignored. */
ncclResult_t pcl_json_check_keys(pcl_plan_ctx_t *c, yajl_val o, const char *const *known);
ncclResult_t pcl_json_need_object(pcl_plan_ctx_t *c, yajl_val v, const char *key);
ncclResult_t pcl_json_u64(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                          uint64_t def, uint64_t min, uint64_t max, uint64_t *out);
ncclResult_t pcl_json_int(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                          int min, int max, int *out);
ncclResult_t pcl_json_bool(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                           int *out);
ncclResult_t pcl_json_str(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                          const char **out);
ncclResult_t pcl_json_array(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                            size_t max, const char *what, yajl_val *out);
/* An array element (the current JSON path) that must be a non-negative integer: an index. */
ncclResult_t pcl_json_elem_index(pcl_plan_ctx_t *c, yajl_val e, long long *out);

/* ---- digests (plan_digest.c) ---- */
/* Of one gpus[] entry (pcl_plan_gpu_t.io_digest). */
uint64_t pcl_plan_gpu_digest(yajl_val gpu);

/* ---- the text (plan_json_text.c) ---- */
/* 1 when s[0 .. len) may be JSON text: it starts like a JSON value, has no control bytes but
 * whitespace outside strings and none inside, nests at most max_depth; else 0 with why (line and
 * column of the first offence). The object shape is checked after parsing. */
int pcl_plan_json_prescan(const char *s, size_t len, int max_depth, char *why, size_t n);
/* For text yajl refused: where (line, column, byte) and yajl's reason, into why. */
void pcl_plan_json_locate(const char *s, size_t len, char *why, size_t n);

/* ---- conversion ---- */
typedef struct {
  pcl_plan_ctx_t *c;
  pcl_plan_t *plan;
  pcl_plan_gpu_t *gpu;
  pcl_plan_block_t *blk;
  int legacy; /* the plan uses MSCCL++ v0.7 op/channel names */
} pcl_plan_conv_t;

/* One threadblock object into v->blk (plan_json_ops.c). */
ncclResult_t pcl_plan_conv_block(pcl_plan_conv_t *v, yajl_val o);
/* One gpus[] entry into v->gpu: chunk counts, channels, remote buffers, threadblocks
 * (plan_json_gpu.c). */
ncclResult_t pcl_plan_conv_gpu(pcl_plan_conv_t *v, yajl_val o);

#endif
