/* SPDX-License-Identifier: MIT
 * Helpers of the shim suite (see shim_test.h) and its main(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pcl_test.h"
#include "shim_test.h"

const char *shim_test_path(const char *var) {
  const char *p = getenv(var);
  ck_assert_msg(p != NULL && p[0] != '\0', "%s is not set (run through ctest)", var);
  return p;
}

struct fake_state *shim_test_fake_at(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL)
    return NULL;
  fake_state_fn fn = (fake_state_fn)dlsym(h, "fake_nccl_state");
  struct fake_state *st = fn ? fn() : NULL;
  dlclose(h);
  return st;
}

struct fake_state *shim_test_use_fake(const char *var) {
  const char *path = shim_test_path(var);
  setenv("PLANCCL_NCCL_LIB", path, 1);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess); /* planccl opens the fake here */
  ck_assert_int_eq(v, FAKE_VERSION);
  struct fake_state *st = shim_test_fake_at(path);
  ck_assert_ptr_nonnull(st);
  return st;
}

int shim_test_last(const struct fake_state *st, const char *name) {
  for (int i = st->ncalls - 1; i >= 0; i--)
    if (strcmp(st->calls[i].name, name) == 0)
      return i;
  return -1;
}

int shim_test_count(const struct fake_state *st, const char *name) {
  int n = 0;
  for (int i = 0; i < st->ncalls; i++)
    n += strcmp(st->calls[i].name, name) == 0;
  return n;
}

int shim_test_count_lines(const char *path, const char *a, const char *b) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int n = 0;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    n += strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
  if (f != NULL)
    fclose(f);
  return n;
}

struct loaded_arg {
  const char *want;
  int found;
};

static int loaded_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  struct loaded_arg *a = arg;
  char rp[PATH_MAX];
  if (info->dlpi_name && info->dlpi_name[0] && realpath(info->dlpi_name, rp) &&
      strcmp(rp, a->want) == 0)
    a->found = 1;
  return 0;
}

int shim_test_loaded(const char *path) {
  char rp[PATH_MAX];
  if (realpath(path, rp) == NULL)
    return 0;
  struct loaded_arg a = {rp, 0};
  dl_iterate_phdr(loaded_cb, &a);
  return a.found;
}

char *shim_test_tmpdir(void) {
  char *t = strdup("/tmp/pcl_shim_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(t));
  return t;
}

void shim_test_mkdirs(const char *path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    mkdir(buf, 0755);
    *p = '/';
  }
  mkdir(buf, 0755);
}

void shim_test_copy(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  ck_assert_msg(in != NULL, "cannot open %s", from);
  FILE *out = fopen(to, "wb");
  ck_assert_msg(out != NULL, "cannot create %s", to);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
  chmod(to, 0755);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(p);
}

void shim_test_rmtree(const char *path) {
  nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  Suite *s = suite_create("shim");
  suite_add_tcase(s, shim_tcase_symbols());
  suite_add_tcase(s, shim_tcase_forward());
  suite_add_tcase(s, shim_tcase_lifecycle());
  suite_add_tcase(s, shim_tcase_discovery());
  suite_add_tcase(s, shim_tcase_lookup());
  return pcl_test_run_suite(s);
}
