/* SPDX-License-Identifier: MIT
 * The process's plan registry, created once at the first communicator that needs it, from the
 * search path of plans_search.c (PLANCCL_PLAN_DIR, then the installed share/planccl/plans found
 * from the library's own path, or for a library never installed the source tree's default set).
 * libplanccl.so and its compat copy lib/nccl/libnccl.so.2 find the same directories. The tuning
 * file is applied to it then (tune_setup.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "comm_int.h"
#include "log.h"
#include "param.h"
#include "plans_search.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pcl_registry_t *registry;

/* Directory of the real path of this library, with `up` trailing components removed. */
static int lib_dir(char *out, size_t len, int up) {
  Dl_info di;
  char rp[PATH_MAX];
  if (!dladdr((void *)&lib_dir, &di) || di.dli_fname == NULL || realpath(di.dli_fname, rp) == NULL)
    return -1;
  for (int i = 0; i <= up; i++) {
    char *slash = strrchr(rp, '/');
    if (slash == NULL)
      return -1;
    *slash = '\0';
  }
  return snprintf(out, len, "%s", rp) < (int)len ? 0 : -1;
}

static void load(void) {
  static pcl_plans_dirs_t search; /* static: PATH_MAX x 32 is too much for a thread's stack */
  char here[PATH_MAX];
  const char *build_tree = NULL, *source_plans = NULL;
#if defined(PCL_BUILD_TREE) && defined(PCL_SOURCE_PLANS)
  build_tree = PCL_BUILD_TREE;
  source_plans = PCL_SOURCE_PLANS;
#endif
  int have = lib_dir(here, sizeof(here), 0) == 0;
  /* The compat copy lib/nccl/libnccl.so.2 (shim/CMakeLists.txt) finds what lib/ would. */
  const char *base = have ? strrchr(here, '/') : NULL;
  if (base != NULL && strcmp(base, "/nccl") == 0)
    have = lib_dir(here, sizeof(here), 1) == 0;
  pcl_plans_search_dirs(pcl_param_plan_dir(), have ? here : NULL, build_tree, source_plans,
                        &search);
  const char *dirs[PCL_PLANS_MAX_DIRS];
  int n = search.n;
  for (int i = 0; i < n; i++)
    dirs[i] = search.path[i];
  if (pcl_registry_create(dirs, n, &registry) != ncclSuccess)
    registry = NULL;
  pcl_tune_setup(registry, have ? here : NULL, build_tree, source_plans);
  int refused = pcl_registry_refused_count(registry);
  PCL_INFO(PCL_LOG_PLAN | PCL_LOG_INIT, "%d plans loaded (%d refused) from %d directories%s%s",
           pcl_registry_count(registry), refused, n, n ? ", last " : "", n ? dirs[n - 1] : "");
}

const pcl_registry_t *pcl_shim_registry(void) {
  pthread_once(&once, load);
  return registry;
}
