/* SPDX-License-Identifier: MIT
 * Private to the registry (registry.c: loading and the untuned rules; registry_tune.c: the
 * tuning table): the registry's fields, which plans count, and the hash helpers both use. */
#ifndef PCL_REGISTRY_INT_H
#define PCL_REGISTRY_INT_H

#include <stdint.h>
#include "registry.h"

#define PCL_REG_TUNED_ONLY 1u /* loaded by pcl_registry_add_tuned_only */
#define PCL_REG_NAMED 2u      /* a range of the applied tuning table runs it */

struct pcl_registry {
  int n_plans, cap_plans;
  pcl_plan_t **plans;
  uint8_t *use; /* per plan, PCL_REG_* bits */
  int n_refused, cap_refused;
  char **refused;
  pcl_tune_t *tune; /* the applied tuning table (owned, names resolved), or NULL */
};

/* Whether plan i counts for a communicator (scratch, channels, the plans hash): every plan but
 * the tuned-only ones, and of those the ones an applied range names when the communicator follows
 * the table (tuned). */
static inline int pcl_registry_in_use(const pcl_registry_t *r, int i, int tuned) {
  return !(r->use[i] & PCL_REG_TUNED_ONLY) || (tuned && (r->use[i] & PCL_REG_NAMED));
}

/* The in-place rule: an in-place call needs an in-place plan; an out-of-place call takes an
 * out-of-place plan, or an in-place one that declares "outofplace_ok". */
static inline int pcl_registry_place_ok(const pcl_plan_t *p, int inplace) {
  return inplace ? p->inplace : (!p->inplace || p->outofplace_ok);
}

/* FNV-1a over 64-bit words and NUL-terminated strings (the NUL keeps "ab","c" from "a","bc"). */
#define PCL_FNV_OFFSET 1469598103934665603ull
static inline uint64_t pcl_fnv_u64(uint64_t h, uint64_t v) {
  return (h ^ v) * 1099511628211ull;
}
static inline uint64_t pcl_fnv_str(uint64_t h, const char *s) {
  for (; s != NULL && *s; s++)
    h = pcl_fnv_u64(h, (uint8_t)*s);
  return pcl_fnv_u64(h, 0);
}

/* Mixes the applied tuning table's ranges for (world, ranks_per_node) into h: what the table
 * decides there (shapes, ranges, winners), not the times. h unchanged without a table. */
uint64_t pcl_registry_tune_hash(const pcl_registry_t *r, int world, int rpn, uint64_t h);

#endif
