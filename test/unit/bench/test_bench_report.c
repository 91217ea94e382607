/* SPDX-License-Identifier: MIT
 * planccl-bench's writers on known results: the table's bandwidth and speedup columns, the CSV
 * (header as the recorded CSV that bench/plot.py is tested on, every row's numbers consistent),
 * merging runs and ranks, the path lookup on a recorded planccl log, the progress line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_report.h"
#include "bench_test.h"

static bench_opts_t opts2(void) {
  /* writable copies: --lib and --coll cut their values up */
  char a[] = "planccl=/p.so", b[] = "nccl=/n.so", c[] = "allreduce,alltoall";
  char *argv[] = {"x", "--lib", a,    "--lib", b,    "--baseline", "nccl", "--coll",
                  c,   "-b",    "1M", "-e",    "4M", "-f",         "4",    NULL};
  bench_opts_t o;
  char err[256];
  ck_assert_int_eq(bench_parse_args(15, argv, &o, err, sizeof(err)), 0);
  o.libs[0].label = "planccl"; /* not into this stack frame */
  o.libs[1].label = "nccl";
  return o;
}

/* Results of two libraries: planccl twice as fast as nccl out-of-place, no in-place alltoall. */
static void fill(bench_result_t *res) {
  for (int l = 0; l < 2; l++) {
    bench_result_clear(&res[l]);
    res[l].measured = 1;
    for (int s = 0; s < 2; s++)
      for (int m = 0; m < BENCH_MODES; m++) {
        res[l].us[BENCH_ALLREDUCE][s][BENCH_OUT][m] = (l ? 20.0 : 10.0) * (s + 1) + m;
        res[l].us[BENCH_ALLREDUCE][s][BENCH_IN][m] = 40.0 * (s + 1);
        res[l].us[BENCH_ALLTOALL][s][BENCH_OUT][m] = 50.0;
      }
  }
  res[0].wrong[BENCH_ALLREDUCE][1][BENCH_IN][BENCH_GRAPH] = 3;
  snprintf(res[0].path[BENCH_ALLREDUCE][0][BENCH_OUT], BENCH_PATH_LEN, "plan:ar_small");
  snprintf(res[0].path[BENCH_ALLREDUCE][0][BENCH_IN], BENCH_PATH_LEN, "plan:ar_small_ip");
  snprintf(res[0].path[BENCH_ALLREDUCE][1][BENCH_OUT], BENCH_PATH_LEN, "nccl");
}

/* What `fn` writes, as a malloc'ed string (through a temporary file: GCC takes open_memstream's
 * buffer for a dangling local). */
static char *capture(void (*fn)(FILE *, const bench_opts_t *, const bench_result_t *, int, int),
                     const bench_opts_t *o, const bench_result_t *res, int l, int ci) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  fn(f, o, res, l, ci);
  long len = ftell(f);
  char *buf = malloc((size_t)len + 1);
  rewind(f);
  ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  return buf;
}

static void csv_adapter(FILE *f, const bench_opts_t *o, const bench_result_t *res, int l, int ci) {
  bench_write_csv(f, o, res);
}

START_TEST(test_table) {
  bench_opts_t o = opts2();
  bench_result_t *res = calloc(2, sizeof(*res));
  fill(res);
  char *t = capture(bench_write_table, &o, res, 0, 0);
  /* 1 MiB in 10 us = 104.86 GB/s, busbw the same on 2 ranks; graph 11 us = 95.33 */
  ck_assert_ptr_nonnull(strstr(t, "# planccl: allreduce, float sum, 2 GPUs, model thread"));
  ck_assert_ptr_nonnull(strstr(t, "xnccl = nccl's time / this time"));
  const char *row = strstr(t, "\n     1048576       262144    float    sum   -1");
  ck_assert_ptr_nonnull(row);
  ck_assert_ptr_nonnull(
      strstr(row, "10.00  104.86  104.86     11.00   95.33      0   2.00   1.91"));
  ck_assert_ptr_nonnull(strstr(row, "plan:ar_small|plan:ar_small_ip"));
  const char *row2 = strstr(t, "\n     4194304      1048576");
  ck_assert_ptr_nonnull(row2);
  ck_assert_ptr_nonnull(
      strstr(row2, "80.00   52.43   52.43     80.00   52.43      3")); /* in-place, 3 wrong */
  ck_assert_ptr_nonnull(strstr(row2, "  nccl\n"));
  free(t);
  /* The baseline has no speedup columns and, without paths, no path column. */
  t = capture(bench_write_table, &o, res, 1, 0);
  ck_assert_ptr_null(strstr(t, "xbase"));
  ck_assert_ptr_null(strstr(t, "path"));
  free(t);
  /* alltoall: busbw (n-1)/n of algbw, in-place not measured */
  t = capture(bench_write_table, &o, res, 1, 1);
  row = strstr(t, "\n     1048576       131072    float   none   -1");
  ck_assert_ptr_nonnull(row);
  ck_assert_ptr_nonnull(strstr(row, "50.00   20.97   10.49     50.00   10.49      0         -"));
  free(t);
  free(res);
}
END_TEST

/* The first line of the recorded CSV bench/plot.py's test runs on. */
static void recorded_header(char *line, size_t len) {
  char path[4096];
  const char *src = getenv("PCL_SOURCE_DIR");
  snprintf(path, sizeof(path), "%s/test/unit/bench/data/h200x2-2026-11-29.csv", src ? src : ".");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  ck_assert_ptr_nonnull(fgets(line, (int)len, f));
  line[strcspn(line, "\n")] = '\0';
  fclose(f);
}

START_TEST(test_csv) {
  bench_opts_t o = opts2();
  bench_result_t *res = calloc(2, sizeof(*res));
  fill(res);
  char *csv = capture(csv_adapter, &o, res, 0, 0), header[512];
  recorded_header(header, sizeof(header));
  ck_assert_str_eq(header, bench_csv_header);
  ck_assert_int_eq(strncmp(csv, header, strlen(header)), 0);
  int rows = 0;
  for (char *save = NULL, *line = strtok_r(strchr(csv, '\n') + 1, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save), rows++) {
    char lib[32], coll[32], place[8], mode[8], path[64] = "";
    size_t bytes, count;
    double us, algbw, busbw;
    long long wrong;
    int n = sscanf(
        line, "%31[^,],%31[^,],thread,2,%zu,%zu,float,%*[^,],-1,%7[^,],%7[^,],%lf,%lf,%lf,%lld,",
        lib, coll, &bytes, &count, place, mode, &us, &algbw, &busbw, &wrong);
    ck_assert_msg(n == 10, "unparsed row: %s", line);
    ck_assert_double_eq_tol(algbw, (double)bytes / us / 1e3, 1e-3);
    double factor = strcmp(coll, "allreduce") == 0 ? 1.0 : 0.5;
    ck_assert_double_eq_tol(busbw, algbw * factor, 1e-3);
    const char *last = strrchr(line, ',');
    sscanf(last + 1, "%63s", path);
    if (strcmp(lib, "planccl") == 0 && strcmp(coll, "allreduce") == 0 && bytes == 1u << 20 &&
        strcmp(place, "in") == 0)
      ck_assert_str_eq(path, "plan:ar_small_ip");
  }
  /* allreduce: 2 libs x 2 sizes x 2 places x 2 modes; alltoall: 2 x 2 x out x 2 */
  ck_assert_int_eq(rows, 16 + 8);
  free(csv);
  /* a library that failed leaves no rows */
  res[1].measured = 0;
  csv = capture(csv_adapter, &o, res, 0, 0);
  ck_assert_ptr_null(strstr(csv, "\nnccl,"));
  free(csv);
  free(res);
}
END_TEST

START_TEST(test_merge_and_ranks) {
  bench_result_t *r = calloc(4, sizeof(*r));
  for (int i = 0; i < 4; i++)
    bench_result_clear(&r[i]);
  r[0].us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 7;
  r[1].us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 9;
  r[0].wrong[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 1;
  r[1].wrong[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 2;
  r[1].us[BENCH_REDUCE][3][BENCH_OUT][BENCH_EAGER] = 5; /* rank 0 did not measure it */
  bench_result_from_ranks(&r[2], r, 2);
  ck_assert_double_eq(r[2].us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER], 9); /* slowest rank */
  ck_assert_int_eq(r[2].wrong[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER], 3);
  ck_assert_double_lt(r[2].us[BENCH_REDUCE][3][BENCH_OUT][BENCH_EAGER], 0);
  ck_assert_int_eq(r[2].measured, 1);
  bench_result_t *best = &r[3];
  bench_result_merge(best, &r[2]);
  r[2].us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 8;
  snprintf(r[2].path[BENCH_REDUCE][2][BENCH_OUT], BENCH_PATH_LEN, "nccl");
  bench_result_merge(best, &r[2]);
  r[2].us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER] = 12;
  bench_result_merge(best, &r[2]);
  ck_assert_double_eq(best->us[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER], 8);
  ck_assert_int_eq(best->wrong[BENCH_REDUCE][2][BENCH_OUT][BENCH_EAGER], 9);
  ck_assert_str_eq(best->path[BENCH_REDUCE][2][BENCH_OUT], "nccl");
  bench_opts_t o = opts2();
  o.colls[0] = BENCH_REDUCE;
  o.nlibs = 1;
  o.nsizes = 4; /* the wrong elements are at size index 2 */
  ck_assert_int_eq(bench_total_wrong(&o, r + 3), 9);
  free(r);
}
END_TEST

START_TEST(test_path_lookup) {
  char log[4096], out[BENCH_PATH_LEN];
  const char *src = getenv("PCL_SOURCE_DIR");
  snprintf(log, sizeof(log), "%s/test/unit/bench/data/pcl_path.log", src ? src : ".");
  bench_path_of(log, BENCH_ALLREDUCE, 1024, 0, out, sizeof(out));
  ck_assert_str_eq(out, "plan:allreduce_2gpu_ll1_small_outofplace");
  bench_path_of(log, BENCH_ALLREDUCE, 1024, 1, out, sizeof(out));
  ck_assert_str_eq(out, "plan:allreduce_2gpu_ll1_small_inplace");
  bench_path_of(log, BENCH_ALLREDUCE, 262144, 0, out, sizeof(out));
  ck_assert_str_eq(out, "nccl");
  bench_path_of(log, BENCH_ALLREDUCE, 102400, 0, out, sizeof(out)); /* 10240 is not a prefix */
  ck_assert_str_eq(out, "");
  bench_path_of(log, BENCH_SENDRECV, 4096, 0, out, sizeof(out));
  ck_assert_str_eq(out, "nccl");
  bench_path_of(log, BENCH_ALLGATHER, 1024, 1, out, sizeof(out));
  ck_assert_str_eq(out, "");
  bench_path_of("/nonexistent/log", BENCH_ALLREDUCE, 1024, 0, out, sizeof(out));
  ck_assert_str_eq(out, "");
  /* The sizes the lines carry: allgather's and reducescatter's total, alltoall's per peer. */
  bench_case_t k;
  bench_case(BENCH_ALLGATHER, BENCH_FLOAT, BENCH_SUM, 4, 0, 4096, &k);
  ck_assert_uint_eq(bench_path_bytes(&k), 4096);
  bench_case(BENCH_ALLTOALL, BENCH_FLOAT, BENCH_SUM, 4, 0, 4096, &k);
  ck_assert_uint_eq(bench_path_bytes(&k), 1024);
}
END_TEST

static void progress_adapter(FILE *f, const bench_opts_t *o, const bench_result_t *res, int l,
                             int ci) {
  bench_progress(f, 3, 10, 3e6, "nccl", BENCH_BROADCAST, 1 << 20);
  bench_progress(f, 1, 200, 1e6, "planccl", BENCH_ALLREDUCE, 1000);
}

START_TEST(test_progress_and_sizes) {
  char *buf = capture(progress_adapter, NULL, NULL, 0, 0), sz[32];
  ck_assert_str_eq(buf, "planccl-bench: [3/10] nccl broadcast 1M done, 0:07 left\n"
                        "planccl-bench: [1/200] planccl allreduce 1000 done, 3:19 left\n");
  free(buf);
  bench_fmt_size(3u << 30, sz, sizeof(sz));
  ck_assert_str_eq(sz, "3G");
  bench_fmt_size(1536, sz, sizeof(sz));
  ck_assert_str_eq(sz, "1536");
}
END_TEST

TCase *bench_tcase_report(void) {
  TCase *tc = tcase_create("report");
  tcase_add_test(tc, test_table);
  tcase_add_test(tc, test_csv);
  tcase_add_test(tc, test_merge_and_ranks);
  tcase_add_test(tc, test_path_lookup);
  tcase_add_test(tc, test_progress_and_sizes);
  return tc;
}
