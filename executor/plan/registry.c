/* SPDX-License-Identifier: MIT
 * Plan registry: recursive directory scan for *.json plans (loaded and validated once), and the
 * deterministic untuned selection rule of docs/architecture.md (priority, narrowest range, file
 * and dir order). The tuning table's part is registry_tune.c. */
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "log.h"
#include "pcl_check.h"
#include "registry_int.h"

#define MAX_SCAN_DEPTH 8
#define ERR_LEN 1024

typedef struct {
  int n, cap;
  char **paths; /* full paths */
  size_t strip; /* length of the scanned dir prefix, for sorting by relative path */
} file_list_t;

static ncclResult_t list_push(file_list_t *l, const char *path) {
  if (l->n == l->cap) {
    int ncap = l->cap ? l->cap * 2 : 16;
    char **np = pcl_realloc(l->paths, (size_t)l->cap, (size_t)ncap, sizeof(char *), "plan list");
    if (np == NULL)
      return ncclSystemError;
    l->paths = np;
    l->cap = ncap;
  }
  l->paths[l->n] = pcl_strdup(path, "plan path");
  if (l->paths[l->n] == NULL)
    return ncclSystemError;
  l->n++;
  return ncclSuccess;
}

static int ends_with_json(const char *name) {
  size_t n = strlen(name);
  return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static ncclResult_t scan_dir(file_list_t *l, const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    if (depth == 0)
      PCL_INFO(PCL_LOG_PLAN, "plan directory %s: %s (skipped)", dir, strerror(errno));
    else
      PCL_WARN(PCL_LOG_PLAN, "plan directory %s: %s (skipped)", dir, strerror(errno));
    return ncclSuccess;
  }
  ncclResult_t res = ncclSuccess;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    char *path = pcl_calloc(len, 1, "plan path");
    if (path == NULL) {
      res = ncclSystemError;
      break;
    }
    snprintf(path, len, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        if (depth + 1 < MAX_SCAN_DEPTH)
          res = scan_dir(l, path, depth + 1);
        else
          PCL_WARN(PCL_LOG_PLAN, "plan directory %s nested too deep (skipped)", path);
      } else if (S_ISREG(st.st_mode) && ends_with_json(e->d_name)) {
        res = list_push(l, path);
      }
    }
    pcl_free(path);
    if (res != ncclSuccess)
      break;
  }
  closedir(d);
  return res;
}

/* All paths of one scan share the "dir/" prefix, so comparing whole paths orders them by their
 * path relative to the directory. */
static int cmp_path(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static ncclResult_t add_plan(pcl_registry_t *r, pcl_plan_t *p, uint8_t use) {
  if (r->n_plans == r->cap_plans) {
    int ncap = r->cap_plans ? r->cap_plans * 2 : 16;
    pcl_plan_t **np =
        pcl_realloc(r->plans, (size_t)r->cap_plans, (size_t)ncap, sizeof(*np), "registry plans");
    if (np == NULL)
      return ncclSystemError;
    r->plans = np;
    uint8_t *nu = pcl_realloc(r->use, (size_t)r->cap_plans, (size_t)ncap, 1, "registry plan use");
    if (nu == NULL)
      return ncclSystemError;
    r->use = nu;
    r->cap_plans = ncap;
  }
  r->use[r->n_plans] = use;
  r->plans[r->n_plans++] = p;
  return ncclSuccess;
}

static ncclResult_t add_refused(pcl_registry_t *r, const char *msg) {
  if (r->n_refused == r->cap_refused) {
    int ncap = r->cap_refused ? r->cap_refused * 2 : 16;
    char **np = pcl_realloc(r->refused, (size_t)r->cap_refused, (size_t)ncap, sizeof(*np),
                            "registry refused");
    if (np == NULL)
      return ncclSystemError;
    r->refused = np;
    r->cap_refused = ncap;
  }
  r->refused[r->n_refused] = pcl_strdup(msg, "registry refused");
  if (r->refused[r->n_refused] == NULL)
    return ncclSystemError;
  r->n_refused++;
  return ncclSuccess;
}

static ncclResult_t load_dir(pcl_registry_t *r, const char *dir_in, uint8_t use) {
  file_list_t l = {0};
  char err[ERR_LEN];
  /* Without trailing slashes, so paths read "dir/file". */
  char *dir = pcl_strdup(dir_in, "plan dir");
  if (dir == NULL)
    return ncclSystemError;
  for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
    dir[n - 1] = '\0';
  ncclResult_t res = scan_dir(&l, dir, 0);
  if (res != ncclSuccess)
    goto out;
  if (l.n > 1)
    qsort(l.paths, (size_t)l.n, sizeof(char *), cmp_path);
  for (int i = 0; i < l.n; i++) {
    pcl_plan_t *p = NULL;
    ncclResult_t lr = pcl_plan_load(l.paths[i], &p, err, sizeof(err));
    if (lr == ncclSuccess) {
      PCL_INFO(PCL_LOG_PLAN,
               "plan loaded%s: %s (name %s, %s, %d gpus, %d per node, %s, %s, "
               "[%llu, %llu], priority %d)",
               use & PCL_REG_TUNED_ONLY ? " (tuned-only)" : "", l.paths[i], p->name,
               pcl_plan_coll_name(p->collective), p->n_gpus, p->nranks_per_node,
               p->protocol == PCL_PLAN_PROTO_LL ? "LL" : "Simple",
               p->inplace ? "in-place" : "out-of-place", (unsigned long long)p->min_message_size,
               (unsigned long long)p->max_message_size, p->priority);
      if ((res = add_plan(r, p, use)) != ncclSuccess) {
        pcl_plan_destroy(p);
        goto out;
      }
    } else {
      PCL_WARN(PCL_LOG_PLAN, "plan refused: %s", err);
      if ((res = add_refused(r, err)) != ncclSuccess)
        goto out;
    }
  }
out:
  for (int i = 0; i < l.n; i++)
    pcl_free(l.paths[i]);
  pcl_free(l.paths);
  pcl_free(dir);
  return res;
}

static ncclResult_t load_dirs(pcl_registry_t *r, const char *const *dirs, int ndirs, uint8_t use) {
  for (int i = 0; i < ndirs; i++) {
    if (dirs[i] == NULL || dirs[i][0] == '\0')
      continue;
    PCL_TRY(load_dir(r, dirs[i], use));
  }
  return ncclSuccess;
}

ncclResult_t pcl_registry_create(const char *const *dirs, int ndirs, pcl_registry_t **out) {
  ncclResult_t res = ncclSuccess;
  pcl_registry_t *r;
  *out = NULL;
  PCL_CALLOC(r, 1, "plan registry");
  if (r == NULL)
    return ncclSystemError;
  if ((res = load_dirs(r, dirs, ndirs, 0)) != ncclSuccess) {
    pcl_registry_destroy(r);
    return res;
  }
  PCL_INFO(PCL_LOG_PLAN, "plan registry: %d plans loaded, %d refused", r->n_plans, r->n_refused);
  *out = r;
  return ncclSuccess;
}

ncclResult_t pcl_registry_add_tuned_only(pcl_registry_t *r, const char *const *dirs, int ndirs) {
  if (r == NULL)
    return ncclSuccess; /* no registry, no plans to choose from */
  int before = r->n_plans;
  PCL_TRY(load_dirs(r, dirs, ndirs, PCL_REG_TUNED_ONLY));
  PCL_INFO(PCL_LOG_PLAN, "plan registry: %d tuned-only plans loaded", r->n_plans - before);
  return ncclSuccess;
}

void pcl_registry_destroy(pcl_registry_t *r) {
  if (r == NULL)
    return;
  for (int i = 0; i < r->n_plans; i++)
    pcl_plan_destroy(r->plans[i]);
  for (int i = 0; i < r->n_refused; i++)
    pcl_free(r->refused[i]);
  pcl_tune_destroy(r->tune);
  pcl_free(r->plans);
  pcl_free(r->use);
  pcl_free(r->refused);
  pcl_free(r);
}

const pcl_plan_t *pcl_registry_select(const pcl_registry_t *r, pcl_plan_coll_t coll, int world,
                                      int rpn, int inplace, uint64_t bytes) {
  return pcl_registry_select_for(r, coll, world, rpn, inplace, bytes, 1);
}

const pcl_plan_t *pcl_registry_select_for(const pcl_registry_t *r, pcl_plan_coll_t coll, int world,
                                          int rpn, int inplace, uint64_t bytes, int registered) {
  const pcl_plan_t *best = NULL;
  if (r == NULL)
    return NULL;
  for (int i = 0; i < r->n_plans; i++) {
    const pcl_plan_t *p = r->plans[i];
    if (r->use[i] & PCL_REG_TUNED_ONLY)
      continue; /* only where a tuned range names it (registry_tune.c) */
    if (p->collective != coll || p->n_gpus != world || p->nranks_per_node != rpn)
      continue;
    if (p->needs_userbuf && !registered)
      continue;
    if (!pcl_registry_place_ok(p, inplace))
      continue;
    if (!pcl_plan_size_selectable(p, bytes))
      continue; /* includes the [min, max] range; whole or in segments */
    if (best == NULL || p->priority > best->priority) {
      best = p;
      continue;
    }
    if (p->priority < best->priority)
      continue;
    /* Strictly narrower wins; on equal width the earlier plan stays. */
    if (p->max_message_size - p->min_message_size < best->max_message_size - best->min_message_size)
      best = p;
  }
  return best;
}

uint64_t pcl_registry_max_scratch_bytes(const pcl_registry_t *r, int world, int rpn,
                                        uint64_t max_bytes, int tuned) {
  uint64_t m = 0;
  for (int i = 0; r && i < r->n_plans; i++) {
    const pcl_plan_t *p = r->plans[i];
    if (p->n_gpus != world || p->nranks_per_node != rpn || !pcl_registry_in_use(r, i, tuned))
      continue;
    uint64_t s = pcl_plan_scratch_bytes_bound(p, max_bytes);
    if (s > m)
      m = s;
  }
  return m;
}

uint64_t pcl_registry_plans_hash(const pcl_registry_t *r, int world, int rpn, int tuned) {
  uint64_t h = PCL_FNV_OFFSET;
  for (int i = 0; r && i < r->n_plans; i++) {
    const pcl_plan_t *p = r->plans[i];
    if (p->n_gpus != world || p->nranks_per_node != rpn || !pcl_registry_in_use(r, i, tuned))
      continue;
    /* Untuned, no plan is named: the hash is the one without a table. */
    uint64_t v[6] = {(uint64_t)p->collective,        p->min_message_size,  p->max_message_size,
                     (uint64_t)(int64_t)p->priority, (uint64_t)p->inplace, tuned ? r->use[i] : 0u};
    h = pcl_fnv_str(h, p->name);
    for (int k = 0; k < 6; k++)
      h = pcl_fnv_u64(h, v[k]);
  }
  return r && tuned ? pcl_registry_tune_hash(r, world, rpn, h) : h;
}

int pcl_registry_max_channels_per_peer(const pcl_registry_t *r, int world, int rpn, int type,
                                       int floor, int tuned) {
  int most = floor;
  for (int i = 0; r && i < r->n_plans; i++) {
    const pcl_plan_t *p = r->plans[i];
    if (p->n_gpus != world || p->nranks_per_node != rpn || !pcl_registry_in_use(r, i, tuned))
      continue;
    for (int g = 0; g < p->n_gpus; g++) {
      const pcl_plan_gpu_t *gpu = &p->gpus[g];
      for (int a = 0; a < gpu->n_channels[type]; a++) {
        int k = pcl_plan_chan_index(gpu->channels[type], a) + 1;
        if (k > most)
          most = k;
      }
    }
  }
  return most;
}

int pcl_registry_count(const pcl_registry_t *r) {
  return r ? r->n_plans : 0;
}

const pcl_plan_t *pcl_registry_plan(const pcl_registry_t *r, int i) {
  return (r && i >= 0 && i < r->n_plans) ? r->plans[i] : NULL;
}

int pcl_registry_refused_count(const pcl_registry_t *r) {
  return r ? r->n_refused : 0;
}

const char *pcl_registry_refused(const pcl_registry_t *r, int i) {
  return (r && i >= 0 && i < r->n_refused) ? r->refused[i] : NULL;
}
