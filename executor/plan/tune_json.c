/* SPDX-License-Identifier: MIT
 * The tuning file's reader (docs/tuning.md): yajl's tree into pcl_tune_t, every field checked for
 * type and range on the way, the ranges of an entry sorted and disjoint, no call shape twice.
 * Each refusal reads "file: json.path: reason", as the plan loader's do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "plan_json_int.h"
#include "tune.h"

#define MAX_JSON_DEPTH 16
#define MAX_FILE_BYTES (16u << 20)

/* Only the collectives that run on plans are measured. */
static int tunable_coll(const char *s) {
  int c = pcl_plan_coll_from_name(s);
  return c >= 0 && c <= PCL_PLAN_COLL_REDUCE ? c : -1;
}

/* A required string field into a fixed identity buffer. */
static ncclResult_t get_text(pcl_plan_ctx_t *c, yajl_val o, const char *key, char *out) {
  const char *s;
  PCL_TRY(pcl_json_str(c, o, key, 1, &s));
  size_t n = strlen(s);
  if (n >= PCL_TUNE_STR_MAX)
    return pcl_plan_fail(c, key, "longer than %d characters", PCL_TUNE_STR_MAX - 1);
  memcpy(out, s, n + 1);
  return ncclSuccess;
}

/* A required string field naming one value of a table (from_name: -1 when unknown). */
static ncclResult_t get_name(pcl_plan_ctx_t *c, yajl_val o, const char *key,
                             int (*from_name)(const char *), const char *expected, int *out) {
  const char *s;
  PCL_TRY(pcl_json_str(c, o, key, 1, &s));
  int v = from_name(s);
  if (v < 0)
    return pcl_plan_fail(c, key, "unknown %s '%s' (expected %s)", key, s, expected);
  *out = v;
  return ncclSuccess;
}

static ncclResult_t get_digest(pcl_plan_ctx_t *c, yajl_val o, const char *key, uint64_t *out) {
  const char *s;
  PCL_TRY(pcl_json_str(c, o, key, 1, &s));
  size_t n = strlen(s);
  if (n == 0 || n > 16 || strspn(s, "0123456789abcdefABCDEF") != n)
    return pcl_plan_fail(c, key, "expected 1 to 16 hex digits, got '%.40s'", s);
  *out = strtoull(s, NULL, 16);
  return ncclSuccess;
}

static ncclResult_t conv_identity(pcl_plan_ctx_t *c, yajl_val root, pcl_tune_identity_t *id) {
  static const char *const keys[] = {"gpu",     "gpus", "link",         "driver", "cuda",
                                     "planccl", "nccl", "plans_digest", NULL};
  yajl_val o = pcl_json_get(root, "identity");
  if (o == NULL)
    return pcl_plan_fail(c, "identity", "missing required field");
  PCL_TRY(pcl_json_need_object(c, o, "identity"));
  size_t p0 = pcl_plan_path_key(c, "identity");
  PCL_TRY(pcl_json_check_keys(c, o, keys));
  PCL_TRY(get_text(c, o, "gpu", id->gpu));
  PCL_TRY(pcl_json_int(c, o, "gpus", 1, 0, 1, PCL_PLAN_MAX_GPUS, &id->gpus));
  PCL_TRY(get_name(c, o, "link", pcl_tune_link_from_name, "nvlink, pcie or shared", &id->link));
  PCL_TRY(get_text(c, o, "driver", id->driver));
  PCL_TRY(get_text(c, o, "cuda", id->cuda));
  PCL_TRY(get_text(c, o, "planccl", id->planccl));
  PCL_TRY(get_text(c, o, "nccl", id->nccl));
  PCL_TRY(get_digest(c, o, "plans_digest", &id->plans_digest));
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

/* A required or optional non-empty name (a plan's, or "nccl"), copied into *out. */
static ncclResult_t get_path(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                             char **out) {
  const char *s;
  PCL_TRY(pcl_json_str(c, o, key, required, &s));
  if (s == NULL)
    return ncclSuccess;
  if (s[0] == '\0')
    return pcl_plan_fail(c, key, "empty name (a plan's name or \"" PCL_TUNE_NCCL "\")");
  *out = pcl_strdup(s, "tune path");
  return *out == NULL ? ncclSystemError : ncclSuccess;
}

static ncclResult_t conv_range(pcl_plan_ctx_t *c, yajl_val o, pcl_tune_range_t *g) {
  static const char *const keys[] = {"min", "max", "path", "us", "runner_up", "runner_up_us", NULL};
  PCL_TRY(pcl_json_need_object(c, o, NULL));
  PCL_TRY(pcl_json_check_keys(c, o, keys));
  PCL_TRY(pcl_json_u64(c, o, "min", 1, 0, 0, UINT64_MAX, &g->min));
  PCL_TRY(pcl_json_u64(c, o, "max", 1, 0, 0, UINT64_MAX, &g->max));
  if (g->min > g->max)
    return pcl_plan_fail(c, "min", "min %llu > max %llu", (unsigned long long)g->min,
                         (unsigned long long)g->max);
  PCL_TRY(get_path(c, o, "path", 1, &g->path));
  g->nccl = strcmp(g->path, PCL_TUNE_NCCL) == 0;
  PCL_TRY(pcl_json_nonneg(c, o, "us", 1, &g->us));
  PCL_TRY(get_path(c, o, "runner_up", 0, &g->runner_up));
  if (g->runner_up == NULL && pcl_json_get(o, "runner_up_us") != NULL)
    return pcl_plan_fail(c, "runner_up_us", "given without runner_up");
  return pcl_json_nonneg(c, o, "runner_up_us", g->runner_up != NULL, &g->runner_up_us);
}

/* Range k against range k - 1: the ranges are sorted by size and share no size. */
static ncclResult_t check_order(pcl_plan_ctx_t *c, const pcl_tune_range_t *r, int k) {
  const pcl_tune_range_t *a = &r[k - 1], *b = &r[k];
  if (b->min > a->max)
    return ncclSuccess;
  return pcl_plan_fail(c, "min", "range [%llu, %llu] %s ranges[%d] [%llu, %llu]",
                       (unsigned long long)b->min, (unsigned long long)b->max,
                       b->max >= a->min ? "overlaps" : "is out of order: it comes before", k - 1,
                       (unsigned long long)a->min, (unsigned long long)a->max);
}

static ncclResult_t conv_ranges(pcl_plan_ctx_t *c, yajl_val o, pcl_tune_entry_t *e) {
  yajl_val a;
  PCL_TRY(pcl_json_array(c, o, "ranges", 1, PCL_TUNE_MAX_RANGES, "ranges", &a));
  if (a->u.array.len == 0)
    return pcl_plan_fail(c, "ranges", "no range (an entry needs at least one)");
  PCL_CALLOC(e->ranges, a->u.array.len, "tune ranges");
  if (e->ranges == NULL)
    return ncclSystemError;
  e->n_ranges = (int)a->u.array.len; /* zeroed: pcl_tune_destroy frees what was filled */
  size_t p0 = pcl_plan_path_key(c, "ranges");
  for (int k = 0; k < e->n_ranges; k++) {
    size_t p1 = pcl_plan_path_idx(c, k);
    PCL_TRY(conv_range(c, a->u.array.values[k], &e->ranges[k]));
    if (k > 0)
      PCL_TRY(check_order(c, e->ranges, k));
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_entry(pcl_plan_ctx_t *c, yajl_val o, pcl_tune_entry_t *e) {
  static const char *const keys[] = {"collective",    "world",         "ranks_per_node",
                                     "ranks_per_gpu", "process_model", "inplace",
                                     "registered",    "ranges",        NULL};
  int coll = 0;
  PCL_TRY(pcl_json_need_object(c, o, NULL));
  PCL_TRY(pcl_json_check_keys(c, o, keys));
  PCL_TRY(get_name(c, o, "collective", tunable_coll,
                   "allreduce, allgather, reducescatter, broadcast or reduce", &coll));
  e->collective = (pcl_plan_coll_t)coll;
  PCL_TRY(pcl_json_int(c, o, "world", 1, 0, 1, PCL_PLAN_MAX_GPUS, &e->world));
  PCL_TRY(pcl_json_int(c, o, "ranks_per_node", 1, 0, 1, e->world, &e->ranks_per_node));
  if (e->world % e->ranks_per_node)
    return pcl_plan_fail(c, "ranks_per_node", "%d ranks do not split into hosts of %d", e->world,
                         e->ranks_per_node);
  PCL_TRY(pcl_json_int(c, o, "ranks_per_gpu", 1, 0, 1, e->ranks_per_node, &e->ranks_per_gpu));
  PCL_TRY(
      get_name(c, o, "process_model", pcl_tune_procs_from_name, "threads or processes", &e->procs));
  PCL_TRY(pcl_json_bool(c, o, "inplace", 1, 0, &e->inplace));
  PCL_TRY(pcl_json_bool(c, o, "registered", 1, 0, &e->registered));
  return conv_ranges(c, o, e);
}

static int same_shape(const pcl_tune_entry_t *a, const pcl_tune_entry_t *b) {
  return a->collective == b->collective && a->world == b->world &&
         a->ranks_per_node == b->ranks_per_node && a->ranks_per_gpu == b->ranks_per_gpu &&
         a->procs == b->procs && a->inplace == b->inplace && a->registered == b->registered;
}

static ncclResult_t conv_entries(pcl_plan_ctx_t *c, yajl_val root, pcl_tune_t *t) {
  yajl_val a;
  PCL_TRY(pcl_json_array(c, root, "entries", 1, PCL_TUNE_MAX_ENTRIES, "entries", &a));
  if (a->u.array.len == 0)
    return ncclSuccess; /* nothing measured: every call keeps the untuned rules */
  PCL_CALLOC(t->entries, a->u.array.len, "tune entries");
  if (t->entries == NULL)
    return ncclSystemError;
  t->n_entries = (int)a->u.array.len;
  size_t p0 = pcl_plan_path_key(c, "entries");
  for (int i = 0; i < t->n_entries; i++) {
    size_t p1 = pcl_plan_path_idx(c, i);
    PCL_TRY(conv_entry(c, a->u.array.values[i], &t->entries[i]));
    for (int j = 0; j < i; j++)
      if (same_shape(&t->entries[i], &t->entries[j]))
        return pcl_plan_fail(c, NULL, "the same call shape as entries[%d]", j);
    pcl_plan_path_pop(c, p1);
  }
  pcl_plan_path_pop(c, p0);
  return ncclSuccess;
}

static ncclResult_t conv_tune(pcl_plan_ctx_t *c, yajl_val root, pcl_tune_t *t) {
  static const char *const keys[] = {"planccl_tune", "identity", "entries", NULL};
  int version = 0;
  if (!YAJL_IS_OBJECT(root))
    return pcl_plan_fail(c, NULL, "expected an object at the top level");
  /* The format's name first: another kind of JSON file is told as such. */
  PCL_TRY(pcl_json_int(c, root, "planccl_tune", 1, 0, 0, 1000000, &version));
  if (version != PCL_TUNE_VERSION)
    return pcl_plan_fail(c, "planccl_tune", "format %d; this planccl reads format %d", version,
                         PCL_TUNE_VERSION);
  PCL_TRY(pcl_json_check_keys(c, root, keys));
  PCL_TRY(conv_identity(c, root, &t->identity));
  return conv_entries(c, root, t);
}

void pcl_tune_destroy(pcl_tune_t *t) {
  if (t == NULL)
    return;
  for (int i = 0; i < t->n_entries; i++) {
    for (int k = 0; k < t->entries[i].n_ranges; k++) {
      pcl_free(t->entries[i].ranges[k].path);
      pcl_free(t->entries[i].ranges[k].runner_up);
    }
    pcl_free(t->entries[i].ranges);
  }
  pcl_free(t->entries);
  pcl_free(t->file);
  pcl_free(t);
}

ncclResult_t pcl_tune_load_buffer(const char *name, const char *json, size_t len, pcl_tune_t **out,
                                  char *err, size_t errlen) {
  pcl_plan_ctx_t c = {.file = name ? name : "(buffer)", .err = err, .errlen = errlen};
  pcl_tune_t *t = NULL;
  yajl_val root = NULL;
  ncclResult_t res;
  *out = NULL;
  if ((res = pcl_json_parse_text(&c, json, len, MAX_JSON_DEPTH, "a tuning file", &root)) !=
      ncclSuccess)
    goto out;
  res = ncclSystemError;
  if (PCL_CALLOC(t, 1, "tune") == NULL || (t->file = pcl_strdup(c.file, "tune file")) == NULL)
    goto out;
  res = conv_tune(&c, root, t);
out:
  if (res == ncclSystemError && err && errlen && !c.failed)
    snprintf(err, errlen, "%s: out of memory", c.file);
  if (root)
    yajl_tree_free(root);
  if (res != ncclSuccess) {
    pcl_tune_destroy(t);
    return res;
  }
  *out = t;
  return ncclSuccess;
}

ncclResult_t pcl_tune_load(const char *path, pcl_tune_t **out, char *err, size_t errlen) {
  char *buf = NULL;
  size_t len = 0;
  *out = NULL;
  ncclResult_t res =
      pcl_json_read_file(path, MAX_FILE_BYTES, "a tuning file", &buf, &len, err, errlen);
  if (res == ncclSuccess)
    res = pcl_tune_load_buffer(path, buf, len, out, err, errlen);
  pcl_free(buf);
  return res;
}
