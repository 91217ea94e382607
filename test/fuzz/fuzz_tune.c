/* SPDX-License-Identifier: MIT
 * libFuzzer target for the tuning-file reader: any byte string is either refused with a message
 * or read into a table whose ranges are sorted and disjoint, which a registry then takes and
 * selects from consistently; never a crash, hang or leak (pcl allocations are counted). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "registry.h"
#include "tune.h"

static void check_table(const pcl_tune_t *t) {
  for (int i = 0; i < t->n_entries; i++) {
    const pcl_tune_entry_t *e = &t->entries[i];
    if (e->n_ranges < 1 || e->world % e->ranks_per_node || e->ranks_per_gpu > e->ranks_per_node)
      abort();
    for (int k = 0; k < e->n_ranges; k++) {
      const pcl_tune_range_t *g = &e->ranges[k];
      if (g->min > g->max || (k > 0 && g->min <= e->ranges[k - 1].max))
        abort();
      if (g->path == NULL || g->nccl != (strcmp(g->path, PCL_TUNE_NCCL) == 0))
        abort();
    }
  }
}

/* The range of e that holds bytes, by a plain scan (the registry searches by halves). */
static const pcl_tune_range_t *holding(const pcl_tune_entry_t *e, uint64_t bytes) {
  for (int k = 0; k < e->n_ranges; k++)
    if (e->ranges[k].min <= bytes && bytes <= e->ranges[k].max)
      return &e->ranges[k];
  return NULL;
}

/* A registry without plans: every plan a range names is not loaded, so only NCCL ranges decide. */
static void select_edges(const pcl_registry_t *r, const pcl_tune_t *t) {
  for (int i = 0; i < t->n_entries; i++) {
    const pcl_tune_entry_t *e = &t->entries[i];
    pcl_registry_call_t c = {.collective = e->collective,
                             .world = e->world,
                             .ranks_per_node = e->ranks_per_node,
                             .ranks_per_gpu = e->ranks_per_gpu,
                             .procs = e->procs,
                             .inplace = e->inplace,
                             .registered = e->registered};
    for (int k = 0; k < e->n_ranges; k++) {
      const uint64_t sizes[] = {e->ranges[k].min - 1, e->ranges[k].min, e->ranges[k].max,
                                e->ranges[k].max + 1};
      for (int s = 0; s < 4; s++) {
        int tuned = -1;
        c.bytes = sizes[s];
        const pcl_tune_range_t *g = holding(e, c.bytes);
        /* The first entry of a shape decides; the reader refuses a shape twice. */
        if (pcl_registry_select_call(r, &c, &tuned) != NULL || tuned != (g != NULL && g->nccl))
          abort();
      }
    }
    (void)pcl_registry_plans_hash(r, e->world, e->ranks_per_node, 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pcl_tune_t *t = NULL;
  char err[512] = "";
  if (pcl_tune_load_buffer("fuzz.json", (const char *)data, size, &t, err, sizeof(err)) !=
      ncclSuccess) {
    if (t != NULL || err[0] == '\0')
      abort(); /* a refusal leaves nothing and says why */
  } else {
    check_table(t);
    pcl_tune_identity_t here = t->identity;
    if (!pcl_tune_identity_check(t, &here, NULL, 0))
      abort(); /* a file applies where it was measured */
    here.gpus++;
    if (pcl_tune_identity_check(t, &here, err, sizeof(err)))
      abort();
    pcl_registry_t *r = NULL;
    if (pcl_registry_create(NULL, 0, &r) == ncclSuccess) {
      pcl_registry_set_tuning(r, t, 1); /* the registry owns it now */
      select_edges(r, t);
      pcl_registry_destroy(r);
    } else {
      pcl_tune_destroy(t);
    }
  }
  if (pcl_alloc_outstanding() != 0)
    abort(); /* a leak on some path */
  return 0;
}
