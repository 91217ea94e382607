/* SPDX-License-Identifier: MIT
 * Private to the JSON readers of executor/plan/ (plan_json*.c and the tuning file's tune_json.c,
 * the only yajl users): typed field accessors that fail with the JSON path, the text reader, the
 * conversion state, and the per-gpu / per-block converters. */
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
/* A finite, non-negative number (integer or not); *out untouched when optional and absent. */
ncclResult_t pcl_json_nonneg(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                             double *out);
ncclResult_t pcl_json_array(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                            size_t max, const char *what, yajl_val *out);
/* An array element (the current JSON path) that must be a non-negative integer: an index. */
ncclResult_t pcl_json_elem_index(pcl_plan_ctx_t *c, yajl_val e, long long *out);

/* ---- digests (plan_digest.c) ---- */
/* Of one gpus[] entry (pcl_plan_gpu_t.io_digest). */
uint64_t pcl_plan_gpu_digest(yajl_val gpu);

/* ---- the text (plan_json_text.c) ---- */
/* Parses json[0 .. len) into *root (yajl_tree_free it), first clearing c->err. What cannot be
 * JSON text (NULL, empty, control bytes, nesting deeper than max_depth) and what yajl refuses
 * fail through pcl_plan_fail at the top level, saying where (line, column); `what` names the
 * document for an empty text ("empty file: a plan is a JSON object"). ncclSystemError when out
 * of memory. */
ncclResult_t pcl_json_parse_text(pcl_plan_ctx_t *c, const char *json, size_t len, int max_depth,
                                 const char *what, yajl_val *root);
/* Reads the whole file at `path` into *out (pcl_free it) and its length into *len. On failure
 * *out is NULL and err holds "path: reason": cannot open, a directory (then "a directory, not
 * <not_dir>"), larger than max_bytes, a read error. ncclSystemError for I/O errors and out of
 * memory, ncclInvalidArgument for a directory or a file too large. */
ncclResult_t pcl_json_read_file(const char *path, size_t max_bytes, const char *not_dir, char **out,
                                size_t *len, char *err, size_t errlen);

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
