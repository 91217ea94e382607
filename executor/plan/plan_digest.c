/* SPDX-License-Identifier: MIT
 * Digests of each rank's program (its gpus[] entry as written) and what they decide: whether the
 * in-place and out-of-place plans of a rooted collective may run side by side (non-roots alike). */
#include <string.h>

#include "plan_json_int.h"

#define FNV_PRIME 1099511628211ull

static uint64_t mix(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * FNV_PRIME;
  return h;
}

static uint64_t mix_str(uint64_t h, const char *s) {
  return mix(h, s, strlen(s) + 1); /* the NUL keeps "ab","c" apart from "a","bc" */
}

/* A local buffer reference ({"type": ..., "index": ...}; remote ones carry buffer_id): its
 * type "i" counts as "o", since a rank whose program differs only there is in place, where the
 * two name the same memory. */
static int local_input_ref(yajl_val o) {
  yajl_val t = pcl_json_get(o, "type");
  return pcl_json_get(o, "index") != NULL && YAJL_IS_STRING(t) && strcmp(t->u.string, "i") == 0;
}

/* Key order and spelling count: two programs written differently digest differently, which
 * only ever refuses a pair that was interchangeable (the safe side). */
static uint64_t digest(uint64_t h, yajl_val v, int depth) {
  const unsigned char tag = v == NULL ? 0 : (unsigned char)v->type;
  h = mix(h, &tag, 1);
  if (v == NULL || depth > 64)
    return h;
  switch (v->type) {
  case yajl_t_string:
    return mix_str(h, v->u.string);
  case yajl_t_number:
    return mix_str(h, v->u.number.r);
  case yajl_t_object: {
    const int as_output = local_input_ref(v);
    for (size_t i = 0; i < v->u.object.len; i++) {
      h = mix_str(h, v->u.object.keys[i]);
      if (as_output && strcmp(v->u.object.keys[i], "type") == 0)
        h = mix_str(mix(h, &(unsigned char){yajl_t_string}, 1), "o"); /* as digest() of "o" */
      else
        h = digest(h, v->u.object.values[i], depth + 1);
    }
    return h;
  }
  case yajl_t_array:
    for (size_t i = 0; i < v->u.array.len; i++)
      h = digest(h, v->u.array.values[i], depth + 1);
    return mix(h, &v->u.array.len, sizeof(v->u.array.len));
  default: /* true, false, null: the tag says it */
    return h;
  }
}

uint64_t pcl_plan_gpu_digest(yajl_val gpu) {
  return digest(1469598103934665603ull, gpu, 0);
}

int pcl_plan_nonroot_alike(const pcl_plan_t *a, const pcl_plan_t *b) {
  if (a == b)
    return 1;
  if (a == NULL || b == NULL || a->collective != b->collective || a->n_gpus != b->n_gpus ||
      a->nranks_per_node != b->nranks_per_node || a->protocol != b->protocol ||
      a->num_threads_per_block != b->num_threads_per_block ||
      a->use_double_scratch_buffer != b->use_double_scratch_buffer ||
      a->buffer_alignment != b->buffer_alignment || a->reuse_resources != b->reuse_resources ||
      a->max_scratch_chunks != b->max_scratch_chunks)
    return 0;
  for (int g = 1; g < a->n_gpus; g++)
    if (a->gpus[g].io_digest != b->gpus[g].io_digest)
      return 0;
  return 1;
}
