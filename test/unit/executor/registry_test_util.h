/* SPDX-License-Identifier: MIT
 * Helpers shared by the registry suites: 2-rank allreduce plans written from a test plan into
 * temporary directories (removed when the test's process exits), and a registry over them.
 * Include it after defining _XOPEN_SOURCE 700 (nftw, mkdtemp). */
#ifndef PCL_REGISTRY_TEST_UTIL_H
#define PCL_REGISTRY_TEST_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>

#include "pcl_test.h"
#include "plan_test_util.h"
#include "registry.h"

static char *template_text; /* the test plan's text: load_template(), free() it */

static inline void load_template(void) {
  char path[1024];
  template_text = read_text(plan_path(path, sizeof(path), "good/ar2_ll.json"), NULL);
  ck_assert_ptr_nonnull(template_text);
}

/* Writes a 2-rank LL allreduce plan (ar2_ll's ops) named `name` into dir/file, with its
 * in-place flag, size range and extra top-level fields replaced. */
static inline void write_plan(const char *dir, const char *file, const char *name, int inplace,
                              uint64_t lo, uint64_t hi, const char *extra) {
  char hdr[512], nm[128];
  snprintf(nm, sizeof(nm), "\"name\": \"%s\"", name);
  snprintf(hdr, sizeof(hdr), "\"min_message_size\": %llu,\n \"max_message_size\": %llu,\n %s",
           (unsigned long long)lo, (unsigned long long)hi, extra ? extra : "");
  char *a = replace_all(template_text, "\"name\": \"test_ar2_ll\"", nm);
  char *b =
      replace_all(a, "\"inplace\": true", inplace ? "\"inplace\": true" : "\"inplace\": false");
  char *c = replace_all(b, "\"min_message_size\": 0,\n \"max_message_size\": 1048576,\n", hdr);
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(c, f);
  fclose(f);
  free(a);
  free(b);
  free(c);
}

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Temporary directories live until the test's process exits (each test forks). */
static char made[8][256];
static int n_made;

static inline void cleanup_dirs(void) {
  for (int i = 0; i < n_made; i++)
    nftw(made[i], rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static inline void make_dir(char *buf, size_t len, const char *tag) {
  snprintf(buf, len, "/tmp/pcl_registry_%s_XXXXXX", tag);
  ck_assert_ptr_nonnull(mkdtemp(buf));
  if (n_made == 0)
    atexit(cleanup_dirs);
  if (n_made < 8)
    snprintf(made[n_made++], sizeof(made[0]), "%s", buf);
}

static inline pcl_registry_t *create(const char *const *dirs, int n) {
  pcl_registry_t *r = NULL;
  ck_assert_int_eq(pcl_registry_create(dirs, n, &r), ncclSuccess);
  ck_assert_ptr_nonnull(r);
  return r;
}

#endif
