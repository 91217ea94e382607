/* SPDX-License-Identifier: MIT
 * Where the plan registry looks for plans: a pure function of the environment value, the
 * library's location and the build layout, so the rule is unit-tested without a library. */
#ifndef PCL_PLANS_SEARCH_H
#define PCL_PLANS_SEARCH_H
#include <limits.h>

#define PCL_PLANS_MAX_DIRS 32

typedef struct {
  int n;
  char path[PCL_PLANS_MAX_DIRS][PATH_MAX];
} pcl_plans_dirs_t;

/* Fills `out`, in search order: the directories of `env` (PLANCCL_PLAN_DIR, ':'-separated; may
 * be NULL), then <lib_dir>/../share/planccl/plans (the installed default set; lib_dir = the real
 * directory of libplanccl.so, NULL when unknown). Only when that directory does not exist and
 * lib_dir lies inside `build_tree` (a library that was never installed: tests) come the
 * collective folders of `source_plans` instead, sorted, without the opt-in `extra/`. build_tree
 * and source_plans may be NULL. Entries past PCL_PLANS_MAX_DIRS, or too long, are dropped. */
void pcl_plans_search_dirs(const char *env, const char *lib_dir, const char *build_tree,
                           const char *source_plans, pcl_plans_dirs_t *out);

/* The opt-in set, which a tuning file may name plans of: <lib_dir>/../share/planccl/plans-extra
 * when it exists, else for a library inside `build_tree` the source tree's `extra/`. 1 with `out`
 * set, or 0 when there is none. */
int pcl_plans_extra_dir(const char *lib_dir, const char *build_tree, const char *source_plans,
                        char out[PATH_MAX]);

#endif
