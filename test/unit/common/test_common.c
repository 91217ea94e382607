/* SPDX-License-Identifier: MIT
 * Unit tests of common/: parameter parsing and defaults, the log line format and destinations,
 * the last-error buffer and the allocation counter. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dtype.h"
#include "log.h"
#include "param.h"
#include "pcl_test.h"

static void set_env(const char *k, const char *v) {
  if (v)
    setenv(k, v, 1);
  else
    unsetenv(k);
  pcl_param_reset();
  pcl_log_reset();
}

START_TEST(test_bool_parsing) {
  const char *yes[] = {"1", "true", "TRUE", "Yes", "yEs", "on"};
  const char *no[] = {"0", "false", "False", "NO", "no", "off"};
  for (size_t i = 0; i < 6; i++) {
    int64_t v = -1;
    ck_assert_int_eq(pcl_param_parse_bool(yes[i], &v), 0);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(pcl_param_parse_bool(no[i], &v), 0);
    ck_assert_int_eq(v, 0);
  }
  int64_t v;
  ck_assert_int_ne(pcl_param_parse_bool("2", &v), 0);
  ck_assert_int_ne(pcl_param_parse_bool("yess", &v), 0);
  ck_assert_int_ne(pcl_param_parse_bool("", &v), 0);
}
END_TEST

START_TEST(test_size_parsing) {
  int64_t v;
  ck_assert_int_eq(pcl_param_parse_size("4096", &v), 0);
  ck_assert_int_eq(v, 4096);
  ck_assert_int_eq(pcl_param_parse_size("4K", &v), 0);
  ck_assert_int_eq(v, 4096);
  ck_assert_int_eq(pcl_param_parse_size("2MB", &v), 0);
  ck_assert_int_eq(v, 2 << 20);
  ck_assert_int_eq(pcl_param_parse_size("1g", &v), 0);
  ck_assert_int_eq(v, 1 << 30);
  ck_assert_int_eq(pcl_param_parse_size("0x10", &v), 0);
  ck_assert_int_eq(v, 16);
  ck_assert_int_ne(pcl_param_parse_size("-1", &v), 0);
  ck_assert_int_ne(pcl_param_parse_size("12Q", &v), 0);
  ck_assert_int_ne(pcl_param_parse_size("99999999999999999999", &v), 0);
}
END_TEST

START_TEST(test_param_defaults_and_env) {
  set_env("PLANCCL_DISABLE", NULL);
  ck_assert_int_eq(pcl_param_disable(), 0);
  ck_assert_str_eq(pcl_param_source(PCL_PARAM_IDX_disable), "default");
  set_env("PLANCCL_DISABLE", "Yes");
  ck_assert_int_eq(pcl_param_disable(), 1);
  ck_assert_str_eq(pcl_param_source(PCL_PARAM_IDX_disable), "environment");
  set_env("PLANCCL_BOOTSTRAP_TIMEOUT_S", "30");
  ck_assert_int_eq(pcl_param_bootstrap_timeout_s(), 30);
  set_env("PLANCCL_SCRATCH_BYTES", "64M");
  ck_assert_int_eq(pcl_param_scratch_bytes(), 64 << 20);
  set_env("PLANCCL_PLAN_DIR", "/a:/b");
  ck_assert_str_eq(pcl_param_plan_dir(), "/a:/b");
  set_env("PLANCCL_PLAN_DIR", "");
  ck_assert_ptr_null(pcl_param_plan_dir());
  ck_assert_str_eq(pcl_param_debug(), "WARN");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_param_bad_value_warns_and_uses_default) {
  set_env("PLANCCL_DEBUG", "NONE"); /* keep stderr clean; the WARN text is still recorded */
  set_env("PLANCCL_STATS", "maybe");
  ck_assert_int_eq(pcl_param_stats(), 0);
  const char *err = pcl_log_last_error();
  ck_assert_ptr_nonnull(strstr(err, "PLANCCL_STATS"));
  ck_assert_ptr_nonnull(strstr(err, "maybe"));
  ck_assert_ptr_nonnull(strstr(err, "default 0"));
  set_env("PLANCCL_BOOTSTRAP_TIMEOUT_S", "0"); /* below the minimum of 1 */
  ck_assert_int_eq(pcl_param_bootstrap_timeout_s(), 120);
  ck_assert_ptr_nonnull(strstr(pcl_log_last_error(), "PLANCCL_BOOTSTRAP_TIMEOUT_S"));
}
END_TEST

/* docs/environment.md documents params.def row for row: every variable has a table row, and
 * every table row names a variable. */
START_TEST(test_param_table_documented) {
  const char *src = getenv("PCL_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/docs/environment.md", src != NULL ? src : ".");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s: cannot open", path);
  char line[1024], name[128];
  int rows = 0, seen[PCL_PARAM_COUNT] = {0};
  while (fgets(line, sizeof(line), f) != NULL) {
    if (sscanf(line, "| `%127[A-Z0-9_]` |", name) != 1 || strncmp(name, "PLANCCL_", 8) != 0)
      continue;
    int found = -1;
    for (int p = 0; p < PCL_PARAM_COUNT; p++)
      if (strcmp(pcl_param_info((pcl_param_idx_t)p)->env, name) == 0)
        found = p;
    ck_assert_msg(found >= 0, "docs/environment.md documents %s, which params.def lacks", name);
    seen[found]++;
    rows++;
  }
  fclose(f);
  for (int p = 0; p < PCL_PARAM_COUNT; p++)
    ck_assert_msg(seen[p] == 1, "%s: %d rows in docs/environment.md, want 1",
                  pcl_param_info((pcl_param_idx_t)p)->env, seen[p]);
  ck_assert_int_eq(rows, PCL_PARAM_COUNT);
}
END_TEST

static char *read_file(const char *path) {
  static char buf[8192];
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

START_TEST(test_log_format_and_file_pattern) {
  char pattern[] = "/tmp/pcl_log_test_%h_%p.txt";
  set_env("PLANCCL_DEBUG_FILE", pattern);
  set_env("PLANCCL_DEBUG", "info");
  pcl_log_set_thread_rank(3, 1);
  PCL_INFO(PCL_LOG_INIT, "hello %d", 42);
  PCL_WARN(PCL_LOG_INIT, "bad thing %s", "x");
  char host[64];
  gethostname(host, sizeof(host));
  char *dot = strchr(host, '.');
  if (dot)
    *dot = '\0';
  char path[256];
  snprintf(path, sizeof(path), "/tmp/pcl_log_test_%s_%d.txt", host, (int)getpid());
  pcl_log_reset(); /* closes the file */
  char *text = read_file(path);
  ck_assert_ptr_nonnull(text);
  char expect[256];
  snprintf(expect, sizeof(expect), "%s:%d:", host, (int)getpid());
  ck_assert_ptr_nonnull(strstr(text, expect));
  ck_assert_ptr_nonnull(strstr(text, "[3/1] PLANCCL INFO hello 42\n"));
  ck_assert_ptr_nonnull(strstr(text, "test_common.c:"));
  ck_assert_ptr_nonnull(strstr(text, "PLANCCL WARN bad thing x\n"));
  unlink(path);
}
END_TEST

START_TEST(test_log_levels_and_subsys) {
  set_env("PLANCCL_DEBUG", "WARN");
  ck_assert(!pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_INIT));
  ck_assert(pcl_log_enabled(PCL_LOG_WARN, PCL_LOG_INIT));
  set_env("PLANCCL_DEBUG", "INFO");
  set_env("PLANCCL_DEBUG_SUBSYS", "INIT,PLAN");
  ck_assert(pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_INIT));
  ck_assert(pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_PLAN));
  ck_assert(!pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_BOOT));
  set_env("PLANCCL_DEBUG_SUBSYS", "^boot");
  ck_assert(pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_INIT));
  ck_assert(!pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_BOOT));
  set_env("PLANCCL_DEBUG", "NONE");
  ck_assert(!pcl_log_enabled(PCL_LOG_WARN, PCL_LOG_INIT));
  /* A WARN is still recorded for ncclGetLastError with logging off. */
  PCL_WARN(PCL_LOG_INIT, "recorded %d", 7);
  ck_assert_str_eq(pcl_log_last_error(), "recorded 7");
}
END_TEST

START_TEST(test_bad_debug_level_warns) {
  set_env("PLANCCL_DEBUG", "LOUD");
  ck_assert(pcl_log_enabled(PCL_LOG_WARN, PCL_LOG_INIT));
  ck_assert(!pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_INIT));
  ck_assert_ptr_nonnull(strstr(pcl_log_last_error(), "PLANCCL_DEBUG"));
}
END_TEST

START_TEST(test_alloc_counter) {
  ck_assert_int_eq(pcl_alloc_outstanding(), 0);
  int *a = pcl_calloc(10, sizeof(int), "ints");
  char *s = pcl_strdup("abc", "str");
  ck_assert_int_eq(pcl_alloc_outstanding(), 2);
  ck_assert_int_eq(a[9], 0);
  a = pcl_realloc(a, 10, 20, sizeof(int), "ints");
  ck_assert_int_eq(a[19], 0);
  ck_assert_int_eq(pcl_alloc_outstanding(), 2);
  pcl_free(a);
  pcl_free(s);
  pcl_free(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The one dtype table: every NCCL type, in enum order, with its size, and names that round-trip. */
START_TEST(test_dtype_table) {
  static const size_t want[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < ncclNumTypes; t++) {
    ck_assert_uint_eq(pcl_dtype_bytes((ncclDataType_t)t), want[t]);
    ck_assert_int_eq(pcl_dtype_from_name(pcl_dtype_name((ncclDataType_t)t)), t);
  }
  ck_assert_int_eq(pcl_dtype_is_float(ncclFloat32), 1);
  ck_assert_int_eq(pcl_dtype_is_float(ncclUint64), 0);
  ck_assert_int_eq(pcl_dtype_mbits(ncclBfloat16), 7);
  ck_assert_int_eq(pcl_dtype_mbits(ncclInt32), 63);
  ck_assert_str_eq(pcl_dtype_name(ncclFloat8e4m3), "e4m3");
  ck_assert_int_eq(pcl_dtype_from_name("half"), ncclFloat16);
  ck_assert_int_eq(pcl_dtype_from_name("fp8_e5m2"), ncclFloat8e5m2);
  ck_assert_int_eq(pcl_dtype_from_name("fp128"), -1);
  ck_assert_int_eq(pcl_dtype_from_name(NULL), -1);
  ck_assert_uint_eq(pcl_dtype_bytes((ncclDataType_t)ncclNumTypes), 0);
  ck_assert_uint_eq(pcl_dtype_bytes((ncclDataType_t)-1), 0);
  ck_assert_str_eq(pcl_dtype_name((ncclDataType_t)99), "?");
}
END_TEST

int main(void) {
  Suite *s = suite_create("common");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_bool_parsing);
  tcase_add_test(tc, test_size_parsing);
  tcase_add_test(tc, test_param_defaults_and_env);
  tcase_add_test(tc, test_param_bad_value_warns_and_uses_default);
  tcase_add_test(tc, test_param_table_documented);
  tcase_add_test(tc, test_log_format_and_file_pattern);
  tcase_add_test(tc, test_log_levels_and_subsys);
  tcase_add_test(tc, test_bad_debug_level_warns);
  tcase_add_test(tc, test_alloc_counter);
  tcase_add_test(tc, test_dtype_table);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
