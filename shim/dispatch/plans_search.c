/* SPDX-License-Identifier: MIT
 * The plan search path (see plans_search.h): PLANCCL_PLAN_DIR, then the installed default set,
 * or for a library that was never installed the source tree's default set; and where the opt-in
 * set is, which a tuning file may name plans of. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "alloc.h"
#include "plans_search.h"

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Appends a/b; 0 when it does not fit. */
static int add(pcl_plans_dirs_t *out, const char *a, const char *b) {
  if (out->n >= PCL_PLANS_MAX_DIRS)
    return 0;
  int len = snprintf(out->path[out->n], PATH_MAX, "%s/%s", a, b);
  if (len <= 0 || len >= PATH_MAX)
    return 0;
  out->n++;
  return 1;
}

/* 1 when `dir` is `tree` or below it (a whole path component, not a name prefix). */
static int inside(const char *dir, const char *tree) {
  char rp[PATH_MAX];
  if (tree == NULL || realpath(tree, rp) == NULL)
    return 0;
  size_t n = strlen(rp);
  return strncmp(dir, rp, n) == 0 && (dir[n] == '/' || dir[n] == '\0');
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* <prefix>/lib -> <prefix> */
static void prefix_of(const char *lib_dir, char prefix[PATH_MAX]) {
  snprintf(prefix, PATH_MAX, "%s", lib_dir);
  char *slash = strrchr(prefix, '/');
  if (slash != NULL)
    *slash = '\0';
}

int pcl_plans_extra_dir(const char *lib_dir, const char *build_tree, const char *source_plans,
                        char out[PATH_MAX]) {
  if (lib_dir == NULL)
    return 0;
  char prefix[PATH_MAX];
  prefix_of(lib_dir, prefix);
  int len = snprintf(out, PATH_MAX, "%s/share/planccl/plans-extra", prefix);
  if (len > 0 && len < PATH_MAX && is_dir(out))
    return 1;
  /* An install (its default set present) has no opt-in set; a library never installed takes the
   * source tree's, as pcl_plans_search_dirs takes its default set. */
  len = snprintf(out, PATH_MAX, "%s/share/planccl/plans", prefix);
  if (len <= 0 || len >= PATH_MAX || is_dir(out) || source_plans == NULL ||
      !inside(lib_dir, build_tree))
    return 0;
  len = snprintf(out, PATH_MAX, "%s/extra", source_plans);
  return len > 0 && len < PATH_MAX && is_dir(out);
}

void pcl_plans_search_dirs(const char *env, const char *lib_dir, const char *build_tree,
                           const char *source_plans, pcl_plans_dirs_t *out) {
  out->n = 0;
  for (const char *s = env; s != NULL && *s;) {
    size_t len = strcspn(s, ":");
    if (len > 0 && len < PATH_MAX && out->n < PCL_PLANS_MAX_DIRS) {
      memcpy(out->path[out->n], s, len);
      out->path[out->n++][len] = '\0';
    }
    s += len + (s[len] == ':');
  }
  if (lib_dir == NULL)
    return;
  char prefix[PATH_MAX];
  prefix_of(lib_dir, prefix);
  if (!add(out, prefix, "share/planccl/plans") || is_dir(out->path[out->n - 1]) ||
      source_plans == NULL || !inside(lib_dir, build_tree))
    return;
  out->n--; /* not installed, in the build tree: the source tree's default set instead */
  DIR *d = opendir(source_plans);
  if (d == NULL)
    return;
  char *names[PCL_PLANS_MAX_DIRS];
  int k = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && k < PCL_PLANS_MAX_DIRS;) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "extra") == 0)
      continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/%s", source_plans, e->d_name) >= (int)sizeof(p) || !is_dir(p))
      continue;
    if ((names[k] = pcl_strdup(e->d_name, "plan folder name")) != NULL)
      k++;
  }
  closedir(d);
  qsort(names, (size_t)k, sizeof(names[0]), cmp_names);
  for (int i = 0; i < k; i++) {
    add(out, source_plans, names[i]);
    pcl_free(names[i]);
  }
}
