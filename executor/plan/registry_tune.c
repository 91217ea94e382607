/* SPDX-License-Identifier: MIT
 * The registry's use of a tuning table (docs/tuning.md): each range's winner resolved to a loaded
 * plan once, when the table is set; the tuned selection; the digest of the loaded plans that a
 * file is measured against; and the table's share of the plans hash. */
#include <string.h>

#include "log.h"
#include "registry_int.h"

/* Does plan p serve every call of the entry's shape? */
static int fits(const pcl_plan_t *p, const pcl_tune_entry_t *e) {
  if (p->collective != e->collective || p->n_gpus != e->world ||
      p->nranks_per_node != e->ranks_per_node)
    return 0;
  if (p->needs_userbuf && !e->registered)
    return 0;
  return pcl_registry_place_ok(p, e->inplace);
}

/* Range k of entry ei to the first loaded plan of its name that fits, or ignored (INFO). */
static void resolve(pcl_registry_t *r, pcl_tune_t *t, int ei, int k) {
  const pcl_tune_entry_t *e = &t->entries[ei];
  pcl_tune_range_t *g = &e->ranges[k];
  g->plan = NULL;
  g->ignored = 0;
  if (g->nccl)
    return;
  int named = 0;
  for (int i = 0; i < r->n_plans; i++) {
    if (strcmp(r->plans[i]->name, g->path) != 0)
      continue;
    named = 1;
    if (fits(r->plans[i], e)) {
      g->plan = r->plans[i];
      r->use[i] |= PCL_REG_NAMED;
      return;
    }
  }
  g->ignored = 1;
  PCL_INFO(PCL_LOG_PLAN,
           "%s: entries[%d].ranges[%d].path: plan '%s' %s (%s, %d ranks, %d per host, %s, %s): "
           "range [%llu, %llu] ignored, the untuned rules hold there",
           t->file, ei, k, g->path, named ? "does not fit the entry" : "is not loaded",
           pcl_plan_coll_name(e->collective), e->world, e->ranks_per_node,
           e->inplace ? "in-place" : "out-of-place", e->registered ? "registered" : "unregistered",
           (unsigned long long)g->min, (unsigned long long)g->max);
}

void pcl_registry_set_tuning(pcl_registry_t *r, pcl_tune_t *t, int identity_ok) {
  if (r == NULL) {
    pcl_tune_destroy(t);
    return;
  }
  for (int i = 0; i < r->n_plans; i++)
    r->use[i] &= (uint8_t)~PCL_REG_NAMED;
  pcl_tune_destroy(r->tune);
  r->tune = NULL;
  if (t == NULL || !identity_ok) {
    pcl_tune_destroy(t);
    return;
  }
  int n = 0, ignored = 0, nccl = 0;
  for (int ei = 0; ei < t->n_entries; ei++)
    for (int k = 0; k < t->entries[ei].n_ranges; k++, n++) {
      resolve(r, t, ei, k);
      ignored += t->entries[ei].ranges[k].ignored;
      nccl += t->entries[ei].ranges[k].nccl;
    }
  r->tune = t;
  PCL_INFO(PCL_LOG_PLAN,
           "tuning file %s applied: %d call shapes, %d ranges (%d to NCCL, %d ignored)", t->file,
           t->n_entries, n, nccl, ignored);
}

static int same_shape(const pcl_tune_entry_t *e, const pcl_registry_call_t *c) {
  return e->collective == c->collective && e->world == c->world &&
         e->ranks_per_node == c->ranks_per_node && e->ranks_per_gpu == c->ranks_per_gpu &&
         e->procs == c->procs && e->inplace == !!c->inplace && e->registered == !!c->registered;
}

/* The applied range that holds the call's size, or NULL (no table, shape or range; ignored). */
static const pcl_tune_range_t *tuned_range(const pcl_tune_t *t, const pcl_registry_call_t *c) {
  for (int i = 0; t != NULL && i < t->n_entries; i++) {
    const pcl_tune_entry_t *e = &t->entries[i];
    if (!same_shape(e, c))
      continue;
    int lo = 0, hi = e->n_ranges; /* the first range whose max >= bytes (sorted, disjoint) */
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (e->ranges[mid].max < c->bytes)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == e->n_ranges || e->ranges[lo].min > c->bytes || e->ranges[lo].ignored)
      return NULL;
    return &e->ranges[lo];
  }
  return NULL;
}

const pcl_plan_t *pcl_registry_select_call(const pcl_registry_t *r, const pcl_registry_call_t *c,
                                           int *tuned) {
  if (tuned != NULL)
    *tuned = 0;
  if (r == NULL)
    return NULL;
  const pcl_tune_range_t *g = c->untuned ? NULL : tuned_range(r->tune, c);
  /* A size the named plan cannot split (alignment) keeps the untuned rules, on every rank. */
  if (g != NULL && (g->nccl || pcl_plan_size_selectable(g->plan, c->bytes))) {
    if (tuned != NULL)
      *tuned = 1;
    return g->plan;
  }
  return pcl_registry_select_for(r, c->collective, c->world, c->ranks_per_node, c->inplace,
                                 c->bytes, c->registered);
}

static uint64_t plan_digest(const pcl_plan_t *p) {
  const uint64_t v[] = {(uint64_t)p->collective,
                        (uint64_t)p->protocol,
                        (uint64_t)p->inplace,
                        (uint64_t)p->outofplace_ok,
                        (uint64_t)p->reuse_resources,
                        (uint64_t)p->num_threads_per_block,
                        (uint64_t)p->use_double_scratch_buffer,
                        p->buffer_alignment,
                        p->min_message_size,
                        p->max_message_size,
                        (uint64_t)p->nranks_per_node,
                        (uint64_t)(int64_t)p->priority,
                        (uint64_t)p->n_gpus};
  uint64_t h = pcl_fnv_str(PCL_FNV_OFFSET, p->name);
  for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
    h = pcl_fnv_u64(h, v[k]);
  for (int g = 0; g < p->n_gpus; g++)
    h = pcl_fnv_u64(h, p->gpus[g].io_digest);
  return h;
}

uint64_t pcl_registry_plans_digest(const pcl_registry_t *r) {
  uint64_t d = 0;
  for (int i = 0; r != NULL && i < r->n_plans; i++) {
    /* splitmix64's finaliser spreads each plan's digest over every bit; the sum ignores order. */
    uint64_t x = plan_digest(r->plans[i]);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    d += x ^ (x >> 31);
  }
  return d;
}

uint64_t pcl_registry_tuning_hash(const pcl_registry_t *r, int world, int rpn) {
  return r ? pcl_registry_tune_hash(r, world, rpn, PCL_FNV_OFFSET) : PCL_FNV_OFFSET;
}

uint64_t pcl_registry_tune_hash(const pcl_registry_t *r, int world, int rpn, uint64_t h) {
  const pcl_tune_t *t = r->tune;
  for (int i = 0; t != NULL && i < t->n_entries; i++) {
    const pcl_tune_entry_t *e = &t->entries[i];
    if (e->world != world || e->ranks_per_node != rpn)
      continue;
    const uint64_t v[] = {(uint64_t)e->collective, (uint64_t)e->ranks_per_gpu, (uint64_t)e->procs,
                          (uint64_t)e->inplace, (uint64_t)e->registered};
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
      h = pcl_fnv_u64(h, v[k]);
    for (int k = 0; k < e->n_ranges; k++) {
      const pcl_tune_range_t *g = &e->ranges[k];
      if (g->ignored) /* the untuned rules, as without the range */
        continue;
      h = pcl_fnv_u64(pcl_fnv_u64(h, g->min), g->max);
      h = pcl_fnv_str(h, g->nccl ? PCL_TUNE_NCCL : g->plan->name);
    }
  }
  return h;
}
