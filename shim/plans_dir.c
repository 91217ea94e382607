/* SPDX-License-Identifier: MIT
 * The process's plan registry, created once at the first communicator that needs it: the
 * directories of PLANCCL_PLAN_DIR, then the installed share/planccl/plans found from the
 * library's own path (<prefix>/lib/libplanccl.so -> <prefix>/share/planccl/plans), then, for a
 * library still in its build tree, the source tree's plans/. */
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

#define MAX_DIRS 32

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
    if (slash == NULL) return -1;
    *slash = '\0';
  }
  return snprintf(out, len, "%s", rp) < (int)len ? 0 : -1;
}

static void load(void) {
  char *dirs[MAX_DIRS];
  int n = 0;
  char *env = NULL;
  const char *pd = pcl_param_plan_dir();
  if (pd != NULL && (env = pcl_strdup(pd, "plan dirs")) != NULL) {
    char *save = NULL;
    for (char *d = strtok_r(env, ":", &save); d && n < MAX_DIRS - 2; d = strtok_r(NULL, ":", &save))
      dirs[n++] = d;
  }
  char installed[PATH_MAX], source[PATH_MAX];
  char prefix[PATH_MAX - 32];
  if (lib_dir(prefix, sizeof(prefix), 1) == 0) {
    snprintf(installed, sizeof(installed), "%s/share/planccl/plans", prefix);
    dirs[n++] = installed;
  }
#if defined(PCL_BUILD_TREE) && defined(PCL_SOURCE_PLANS)
  /* A library inside the build tree (tests, bench from the build dir) uses the source plans. */
  char here[PATH_MAX];
  char build_rp[PATH_MAX];
  if (lib_dir(here, sizeof(here), 0) == 0 && realpath(PCL_BUILD_TREE, build_rp) != NULL &&
      strncmp(here, build_rp, strlen(build_rp)) == 0) {
    snprintf(source, sizeof(source), "%s", PCL_SOURCE_PLANS);
    dirs[n++] = source;
  }
#else
  (void)source;
#endif
  if (pcl_registry_create((const char *const *)dirs, n, &registry) != ncclSuccess) registry = NULL;
  int refused = pcl_registry_refused_count(registry);
  PCL_INFO(PCL_LOG_PLAN | PCL_LOG_INIT, "%d plans loaded (%d refused) from %d directories%s%s",
           pcl_registry_count(registry), refused, n, n ? ", last " : "", n ? dirs[n - 1] : "");
  pcl_free(env);
}

const pcl_registry_t *pcl_shim_registry(void) {
  pthread_once(&once, load);
  return registry;
}
