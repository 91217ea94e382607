/* SPDX-License-Identifier: MIT
 * The process's plan registry, created once at the first communicator that needs it: the
 * directories of PLANCCL_PLAN_DIR, then the installed share/planccl/plans found from the
 * library's own path (<prefix>/lib/libplanccl.so -> <prefix>/share/planccl/plans), or, for a
 * library still in its build tree, the source tree's default plans (plans/<collective>/, not
 * the opt-in plans/extra/). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "alloc.h"
#include "comm_int.h"
#include "log.h"
#include "param.h"

#define MAX_DIRS 32
#define MAX_SOURCE_DIRS 8 /* collective folders of the source plans/ (allreduce, ...) */

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
  char installed[PATH_MAX], source[MAX_SOURCE_DIRS][PATH_MAX];
  char prefix[PATH_MAX - 32];
  if (lib_dir(prefix, sizeof(prefix), 1) == 0) {
    snprintf(installed, sizeof(installed), "%s/share/planccl/plans", prefix);
    dirs[n++] = installed;
  }
#if defined(PCL_BUILD_TREE) && defined(PCL_SOURCE_PLANS)
  /* A library still in the build tree (tests; not an install, even one under the build dir)
   * has no installed plans: it takes the source tree's default set, never the opt-in extra/. */
  char here[PATH_MAX];
  char build_rp[PATH_MAX];
  struct stat st;
  if (n > 0 && stat(dirs[n - 1], &st) == 0 && S_ISDIR(st.st_mode)) {
    /* installed plans found: they are the default set */
  } else if (lib_dir(here, sizeof(here), 0) == 0 && realpath(PCL_BUILD_TREE, build_rp) != NULL &&
             strncmp(here, build_rp, strlen(build_rp)) == 0) {
    DIR *d = opendir(PCL_SOURCE_PLANS);
    struct dirent *e;
    int k = 0;
    while (d != NULL && (e = readdir(d)) != NULL && n < MAX_DIRS && k < MAX_SOURCE_DIRS) {
      if (e->d_name[0] == '.' || strcmp(e->d_name, "extra") == 0) continue;
      snprintf(source[k], sizeof(source[k]), "%s/%s", PCL_SOURCE_PLANS, e->d_name);
      if (stat(source[k], &st) == 0 && S_ISDIR(st.st_mode)) dirs[n++] = source[k++];
    }
    if (d != NULL) closedir(d);
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
