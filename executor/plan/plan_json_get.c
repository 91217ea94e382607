/* SPDX-License-Identifier: MIT
 * Typed accessors for the plan loader: each reads one JSON field, checks its type and range, and
 * reports a failure with the field's JSON path. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "plan_json_int.h"

const char *pcl_json_type_name(yajl_val v) {
  if (v == NULL)
    return "nothing";
  switch (v->type) {
  case yajl_t_string:
    return "a string";
  case yajl_t_number:
    return "a number";
  case yajl_t_object:
    return "an object";
  case yajl_t_array:
    return "an array";
  case yajl_t_true:
  case yajl_t_false:
    return "a boolean";
  case yajl_t_null:
    return "null";
  default:
    return "something else";
  }
}

yajl_val pcl_json_get(yajl_val o, const char *key) {
  if (!YAJL_IS_OBJECT(o))
    return NULL;
  for (size_t i = 0; i < o->u.object.len; i++)
    if (strcmp(o->u.object.keys[i], key) == 0)
      return o->u.object.values[i];
  return NULL;
}

/* Refuses unknown and duplicate keys. Keys starting with '_' are comments and ignored. */
ncclResult_t pcl_json_check_keys(pcl_plan_ctx_t *c, yajl_val o, const char *const *known) {
  for (size_t i = 0; i < o->u.object.len; i++) {
    const char *k = o->u.object.keys[i];
    if (k[0] == '_')
      continue;
    int ok = 0;
    for (const char *const *p = known; *p; p++)
      if (strcmp(*p, k) == 0)
        ok = 1;
    if (!ok)
      return pcl_plan_fail(c, k, "unknown field");
    for (size_t j = 0; j < i; j++)
      if (strcmp(o->u.object.keys[j], k) == 0)
        return pcl_plan_fail(c, k, "duplicate field");
  }
  return ncclSuccess;
}

ncclResult_t pcl_json_need_object(pcl_plan_ctx_t *c, yajl_val v, const char *key) {
  if (!YAJL_IS_OBJECT(v))
    return pcl_plan_fail(c, key, "expected an object, got %s", pcl_json_type_name(v));
  return ncclSuccess;
}

/* Unsigned integer field. Parsed from yajl's raw text so the full uint64 range works. */
ncclResult_t pcl_json_u64(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                          uint64_t def, uint64_t min, uint64_t max, uint64_t *out) {
  yajl_val v = pcl_json_get(o, key);
  if (v == NULL) {
    if (required)
      return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (!YAJL_IS_NUMBER(v))
    return pcl_plan_fail(c, key, "expected an integer, got %s", pcl_json_type_name(v));
  const char *r = YAJL_GET_NUMBER(v);
  if (r == NULL || r[0] < '0' || r[0] > '9')
    return pcl_plan_fail(c, key, "expected a non-negative integer, got %s", r ? r : "?");
  for (const char *p = r; *p; p++)
    if (*p < '0' || *p > '9')
      return pcl_plan_fail(c, key, "expected an integer, got %s", r);
  errno = 0;
  unsigned long long x = strtoull(r, NULL, 10);
  if (errno == ERANGE || x < min || x > max)
    return pcl_plan_fail(c, key, "value %s out of range [%llu, %llu]", r, (unsigned long long)min,
                         (unsigned long long)max);
  *out = x;
  return ncclSuccess;
}

ncclResult_t pcl_json_int(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                          int min, int max, int *out) {
  yajl_val v = pcl_json_get(o, key);
  if (v == NULL) {
    if (required)
      return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (!YAJL_IS_INTEGER(v))
    return pcl_plan_fail(c, key, "expected an integer, got %s", pcl_json_type_name(v));
  long long x = YAJL_GET_INTEGER(v);
  if (x < min || x > max)
    return pcl_plan_fail(c, key, "value %lld out of range [%d, %d]", x, min, max);
  *out = (int)x;
  return ncclSuccess;
}

ncclResult_t pcl_json_bool(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required, int def,
                           int *out) {
  yajl_val v = pcl_json_get(o, key);
  if (v == NULL) {
    if (required)
      return pcl_plan_fail(c, key, "missing required field");
    *out = def;
    return ncclSuccess;
  }
  if (YAJL_IS_TRUE(v))
    *out = 1;
  else if (YAJL_IS_FALSE(v))
    *out = 0;
  else
    return pcl_plan_fail(c, key, "expected a boolean, got %s", pcl_json_type_name(v));
  return ncclSuccess;
}

ncclResult_t pcl_json_str(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                          const char **out) {
  yajl_val v = pcl_json_get(o, key);
  *out = NULL;
  if (v == NULL)
    return required ? pcl_plan_fail(c, key, "missing required field") : ncclSuccess;
  if (!YAJL_IS_STRING(v))
    return pcl_plan_fail(c, key, "expected a string, got %s", pcl_json_type_name(v));
  *out = YAJL_GET_STRING(v);
  return ncclSuccess;
}

ncclResult_t pcl_json_nonneg(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                             double *out) {
  yajl_val v = pcl_json_get(o, key);
  if (v == NULL)
    return required ? pcl_plan_fail(c, key, "missing required field") : ncclSuccess;
  if (!YAJL_IS_NUMBER(v))
    return pcl_plan_fail(c, key, "expected a number, got %s", pcl_json_type_name(v));
  /* yajl marks a number whose text strtod read whole and in range (1e999 is not). */
  double d = v->u.number.d;
  if (!YAJL_IS_DOUBLE(v) || !isfinite(d) || d < 0)
    return pcl_plan_fail(c, key, "value %s is not a finite non-negative number", v->u.number.r);
  *out = d;
  return ncclSuccess;
}

/* Array field; *out stays NULL when optional and absent. */
ncclResult_t pcl_json_array(pcl_plan_ctx_t *c, yajl_val o, const char *key, int required,
                            size_t max, const char *what, yajl_val *out) {
  yajl_val v = pcl_json_get(o, key);
  *out = NULL;
  if (v == NULL)
    return required ? pcl_plan_fail(c, key, "missing required field") : ncclSuccess;
  if (!YAJL_IS_ARRAY(v))
    return pcl_plan_fail(c, key, "expected an array, got %s", pcl_json_type_name(v));
  if (v->u.array.len > max)
    return pcl_plan_fail(c, key, "%zu %s exceed the limit of %zu", v->u.array.len, what, max);
  *out = v;
  return ncclSuccess;
}

ncclResult_t pcl_json_elem_index(pcl_plan_ctx_t *c, yajl_val e, long long *out) {
  if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0)
    return pcl_plan_fail(c, NULL, "expected a non-negative integer, got %s", pcl_json_type_name(e));
  *out = YAJL_GET_INTEGER(e);
  return ncclSuccess;
}
