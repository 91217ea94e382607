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
  return shim_test_use_fake_version(var, FAKE_VERSION);
}

struct fake_state *shim_test_use_fake_version(const char *var, int version) {
  const char *path = shim_test_path(var);
  setenv("PLANCCL_NCCL_LIB", path, 1);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess); /* planccl opens the fake here */
  ck_assert_int_eq(v, version);
  struct fake_state *st = shim_test_fake_at(path);
  ck_assert_ptr_nonnull(st);
  return st;
}

ncclComm_t shim_test_make_comm(struct fake_state *st, int nranks, int rank, void **real) {
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  ck_assert_int_eq(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  ck_assert_ptr_nonnull(comm);
  *real = st->last_comm;
  ck_assert_ptr_ne(comm, *real); /* the application sees planccl's comm, not the real one */
  return comm;
}

void shim_test_set_result(struct fake_state *st, const char *name, ncclResult_t r) {
  for (int i = 0; i < st->nresults; i++)
    if (strcmp(st->results[i].name, name) == 0) {
      st->results[i].result = r;
      return;
    }
  snprintf(st->results[st->nresults].name, sizeof(st->results[0].name), "%s", name);
  st->results[st->nresults++].result = r;
}

void shim_test_destroy_with_stats(ncclComm_t comm, const char *path) {
  fflush(stderr);
  int saved = dup(2);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(fd, 0);
  dup2(fd, 2);
  close(fd);
  ncclResult_t res = ncclCommDestroy(comm);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ck_assert_int_eq(res, ncclSuccess);
}

long shim_test_stats_calls(const char *path, const char *coll, const char *route) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  const char *prefix = "planccl stats: ";
  char line[512];
  long calls = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, prefix, strlen(prefix)) != 0)
      continue;
    /* "<collective> <route, may hold spaces> <calls> <bytes>", blank-padded. */
    char name[64], *p = line + strlen(prefix);
    int used = 0;
    if (sscanf(p, "%63s %n", name, &used) != 1 || strcmp(name, coll) != 0)
      continue;
    p += used;
    line[strcspn(line, "\n")] = '\0';
    char *end = p + strlen(p);
    for (int field = 0; field < 2; field++) { /* drop bytes, then calls */
      while (end > p && end[-1] == ' ')
        end--;
      while (end > p && end[-1] != ' ')
        end--;
    }
    long n = strtol(end, NULL, 10);
    while (end > p && end[-1] == ' ')
      end--;
    if ((size_t)(end - p) == strlen(route) && strncmp(p, route, (size_t)(end - p)) == 0)
      calls += n;
  }
  fclose(f);
  return calls;
}

int shim_test_stats_rows(const char *path, const char *coll) {
  char needle[80];
  snprintf(needle, sizeof(needle), "planccl stats: %s ", coll);
  return shim_test_count_lines(path, needle, NULL);
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

char *shim_test_log_dir(char *log, size_t len) {
  char *dir = shim_test_tmpdir();
  snprintf(log, len, "%s/log.txt", dir);
  setenv("PLANCCL_DEBUG_FILE", log, 1);
  return dir;
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
  suite_add_tcase(s, shim_tcase_config());
  suite_add_tcase(s, shim_tcase_suspend());
  suite_add_tcase(s, shim_tcase_levels());
  return pcl_test_run_suite(s);
}
