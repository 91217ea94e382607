/* SPDX-License-Identifier: MIT
 * PLANCCL_STATS: fixed-size counters of calls and bytes per (collective, path), path being a plan
 * of the registry or "nccl" with the reason, allocated once per communicator and printed at
 * destroy; and the PLANCCL_DEBUG=INFO line that names the path of each (collective, size class)
 * once per communicator. */
#include <stdio.h>
#include "alloc.h"
#include "comm_int.h"
#include "log.h"
#include "param.h"

ncclResult_t pcl_stats_create(const pcl_registry_t *reg, struct pcl_comm_stats **out) {
  struct pcl_comm_stats *s;
  if (PCL_CALLOC(s, 1, "comm stats") == NULL)
    return ncclSystemError;
  s->reg = reg;
  s->nslots = PCL_WHY_COUNT + pcl_registry_count(reg);
  if (PCL_CALLOC(s->cells, (size_t)PCL_COLL_COUNT * (size_t)s->nslots, "stat cells") == NULL) {
    pcl_free(s);
    return ncclSystemError;
  }
  *out = s;
  return ncclSuccess;
}

void pcl_stats_destroy(struct pcl_comm_stats *s) {
  if (s == NULL)
    return;
  pcl_free(s->cells);
  pcl_free(s);
}

uint32_t pcl_stats_slot(const struct pcl_comm_stats *s, const struct pcl_dispatch_decision *d) {
  if (d->path == PCL_PATH_PLAN && s != NULL)
    for (int i = 0; i < pcl_registry_count(s->reg); i++)
      if (pcl_registry_plan(s->reg, i) == d->plan)
        return (uint32_t)(PCL_WHY_COUNT + i);
  return (uint32_t)d->why;
}

static void slot_name(const struct pcl_comm_stats *s, int slot, char *buf, size_t len) {
  if (slot >= PCL_WHY_COUNT) {
    snprintf(buf, len, "plan %s", pcl_registry_plan(s->reg, slot - PCL_WHY_COUNT)->name);
  } else if (slot == PCL_WHY_COUNT0) {
    snprintf(buf, len, "none (count 0)");
  } else {
    snprintf(buf, len, "nccl (%s)", pcl_why_name((pcl_why_t)slot));
  }
}

void pcl_stats_print(struct ncclComm *c) {
  struct pcl_comm_stats *s = c->stats;
  if (s == NULL || !pcl_param_stats())
    return;
  char head[256];
  snprintf(head, sizeof(head), "planccl stats: comm %p rank %d of %d, device %d, %s%s%s", (void *)c,
           c->rank, c->nranks, c->cuda_dev, c->pcl ? "planned" : "pass-through", c->pcl ? "" : ": ",
           c->pcl ? "" : c->passthrough_why);
  /* One fprintf per line: lines of several ranks in one process stay whole. */
  fprintf(stderr, "%s\n", head);
  fprintf(stderr, "planccl stats: %-14s %-48s %12s %16s\n", "collective", "path", "calls", "bytes");
  uint64_t planned = 0, total = 0;
  for (int coll = 0; coll < PCL_COLL_COUNT; coll++)
    for (int slot = 0; slot < s->nslots; slot++) {
      const struct pcl_stat_cell *cell = &s->cells[(size_t)coll * (size_t)s->nslots + slot];
      if (cell->calls == 0)
        continue;
      char name[160];
      slot_name(s, slot, name, sizeof(name));
      fprintf(stderr, "planccl stats: %-14s %-48s %12llu %16llu\n", pcl_coll_name(coll), name,
              (unsigned long long)cell->calls, (unsigned long long)cell->bytes);
      total += cell->calls;
      if (slot >= PCL_WHY_COUNT)
        planned += cell->calls;
    }
  fprintf(stderr, "planccl stats: rank %d: %llu of %llu calls ran on plans\n", c->rank,
          (unsigned long long)planned, (unsigned long long)total);
}

void pcl_stats_log_path(struct ncclComm *c, const struct pcl_coll_args *a, int inplace,
                        const struct pcl_dispatch_decision *d) {
  if (!pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_COLL))
    return;
  uint64_t bytes = d->msg_bytes;
  int cls = bytes ? 63 - __builtin_clzll(bytes) : 0;
  uint64_t bit = 1ull << cls;
  if (c->path_logged[a->coll] & bit)
    return;
  c->path_logged[a->coll] |= bit;
  /* "pcl_path coll=... bytes=... path=..." is parsed by planccl-bench: keep the tokens. */
  PCL_INFO(PCL_LOG_COLL,
           "pcl_path coll=%s bytes=%llu class=2^%d inplace=%d dtype=%d op=%d "
           "path=%s%s (%s)",
           pcl_coll_name(a->coll), (unsigned long long)bytes, cls, inplace, (int)a->dtype,
           (int)a->op,
           d->path == PCL_PATH_PLAN   ? "plan:"
           : d->path == PCL_PATH_NCCL ? "nccl"
           : d->path == PCL_PATH_NOOP ? "noop"
                                      : "error",
           d->path == PCL_PATH_PLAN ? d->plan->name : "", pcl_why_name(d->why));
}
