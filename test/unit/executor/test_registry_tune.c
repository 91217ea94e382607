/* SPDX-License-Identifier: MIT
 * The registry with a tuning table: tuned ranges choose the named plan (a tuned-only one too) or
 * NCCL, everything else keeps the untuned rules; a stale identity or a name not loaded leaves
 * the untuned rules; the plans hash follows what the table decides; the plans digest. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdint.h>
#include <sys/stat.h>

#include "registry_test_util.h"
#include "tune_test_util.h"

/* Regular plans a_wide [0, 1 MiB] and b_narrow [0, 4 KiB] (the untuned choice up to 4 KiB), and
 * the tuned-only plan "extra" [0, 2 MiB]; all 2-rank in-place allreduce, sizes multiples of 32. */
static pcl_registry_t *create_tuned(void) {
  char d[256], x[256];
  load_template();
  make_dir(d, sizeof(d), "tune");
  make_dir(x, sizeof(x), "tune_extra");
  write_plan(d, "a_wide.json", "a_wide", 1, 0, 1 << 20, NULL);
  write_plan(d, "b_narrow.json", "b_narrow", 1, 0, 4096, NULL);
  write_plan(x, "extra.json", "extra", 1, 0, 2 << 20, "\"priority\": 9,\n");
  free(template_text);
  const char *dirs[] = {d}, *extra[] = {x};
  pcl_registry_t *r = create(dirs, 1);
  ck_assert_int_eq(pcl_registry_add_tuned_only(r, extra, 1), ncclSuccess);
  ck_assert_int_eq(pcl_registry_count(r), 3);
  return r;
}

/* The shape of TUNE_GOOD's entry. */
static pcl_registry_call_t call(uint64_t bytes) {
  return (pcl_registry_call_t){.collective = PCL_PLAN_COLL_ALLREDUCE,
                               .world = 2,
                               .ranks_per_node = 2,
                               .ranks_per_gpu = 1,
                               .procs = PCL_TUNE_PROCS_THREADS,
                               .inplace = 1,
                               .registered = 0,
                               .bytes = bytes};
}

/* The selected plan's name, "NCCL" for NULL; *tuned whether the table decided. */
static const char *sel(const pcl_registry_t *r, pcl_registry_call_t c, int *tuned) {
  const pcl_plan_t *p = pcl_registry_select_call(r, &c, tuned);
  return p ? p->name : "NCCL";
}

static void set_table(pcl_registry_t *r, const char *text) {
  char err[512];
  pcl_tune_t *t = NULL;
  ck_assert_int_eq(tune_parse(text, &t, err, sizeof(err)), ncclSuccess);
  pcl_registry_set_tuning(r, t, 1);
}

START_TEST(test_tuned_ranges_applied) {
  pcl_registry_t *r = create_tuned();
  int tuned = -1;
  ck_assert_str_eq(sel(r, call(1024), &tuned), "b_narrow"); /* untuned until a table is set */
  ck_assert_int_eq(tuned, 0);
  set_table(r, TUNE_GOOD);
  ck_assert_str_eq(sel(r, call(64), &tuned), "a_wide"); /* the file overrides the ranges */
  ck_assert_int_eq(tuned, 1);
  ck_assert_str_eq(sel(r, call(2048), &tuned), "a_wide");
  ck_assert_str_eq(sel(r, call(2080), &tuned), "extra"); /* tuned-only, named */
  ck_assert_str_eq(sel(r, call(4096), &tuned), "extra");
  ck_assert_str_eq(sel(r, call(4128), &tuned), "NCCL");
  ck_assert_int_eq(tuned, 1);
  ck_assert_str_eq(sel(r, call(65536), &tuned), "NCCL");
  /* Outside the ranges, and in a gap, the untuned rules. */
  ck_assert_str_eq(sel(r, call(32), &tuned), "b_narrow");
  ck_assert_int_eq(tuned, 0);
  ck_assert_str_eq(sel(r, call(65568), &tuned), "a_wide");
  ck_assert_int_eq(tuned, 0);
  /* A size the named plan cannot split keeps the untuned rules (none can take it here). */
  ck_assert_str_eq(sel(r, call(1040), &tuned), "NCCL");
  ck_assert_int_eq(tuned, 0);
  /* The untuned rules never take the tuned-only plan, though its priority is highest. */
  const pcl_plan_t *p = pcl_registry_select(r, PCL_PLAN_COLL_ALLREDUCE, 2, 2, 1, 3072);
  ck_assert_str_eq(p->name, "b_narrow");
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Every part of the shape must equal the entry's; another shape keeps the untuned rules. */
START_TEST(test_tuned_shape_exact) {
  pcl_registry_t *r = create_tuned();
  set_table(r, TUNE_GOOD);
  int tuned = -1;
  pcl_registry_call_t c = call(1024);
  c.ranks_per_gpu = 2;
  ck_assert_str_eq(sel(r, c, &tuned), "b_narrow");
  ck_assert_int_eq(tuned, 0);
  c = call(1024);
  c.procs = PCL_TUNE_PROCS_PROCESSES;
  ck_assert_str_eq(sel(r, c, &tuned), "b_narrow");
  c = call(1024);
  c.registered = 1;
  ck_assert_str_eq(sel(r, c, &tuned), "b_narrow");
  c = call(1024);
  c.inplace = 0;
  ck_assert_str_eq(sel(r, c, &tuned), "NCCL"); /* no out-of-place plan */
  ck_assert_int_eq(tuned, 0);
  c = call(1024);
  c.collective = PCL_PLAN_COLL_ALLGATHER;
  ck_assert_str_eq(sel(r, c, NULL), "NCCL");
  ck_assert_ptr_null(pcl_registry_select_call(NULL, &c, &tuned));
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A tuned-only plan counts for the communicator (scratch, channels, hash) only once named. */
START_TEST(test_tuned_only_counts_when_named) {
  pcl_registry_t *r = create_tuned();
  /* Up to 2 MiB: a_wide's 1 MiB needs 4 MiB of scratch (test_registry), extra's 2 MiB twice. */
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 1), 4u << 20);
  uint64_t h = pcl_registry_plans_hash(r, 2, 2, 1);
  char *none = tune_text("\"path\": \"extra\"", "\"path\": \"nccl\"");
  set_table(r, none); /* names a_wide only */
  free(none);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 1), 4u << 20);
  set_table(r, TUNE_GOOD);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 1), 8u << 20);
  ck_assert_uint_ne(pcl_registry_plans_hash(r, 2, 2, 1), h);
  pcl_registry_set_tuning(r, NULL, 1);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 1), 4u << 20);
  ck_assert_uint_eq(pcl_registry_plans_hash(r, 2, 2, 1), h);
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A communicator whose ranks read different tables follows none: with tuned = 0 the scratch,
 * channels and plans hash are those without the table, and its calls ignore the table. The
 * tuning hash the ranks compare first is the same with no table and with one that has no entry
 * of the communicator's shape. */
START_TEST(test_untuned_communicator) {
  pcl_registry_t *r = create_tuned();
  uint64_t h = pcl_registry_plans_hash(r, 2, 2, 1), none = pcl_registry_tuning_hash(r, 2, 2);
  ck_assert_uint_eq(pcl_registry_tuning_hash(r, 4, 4), none);
  set_table(r, TUNE_GOOD);
  ck_assert_uint_ne(pcl_registry_tuning_hash(r, 2, 2), none);
  ck_assert_uint_eq(pcl_registry_tuning_hash(r, 4, 4), none); /* no entry of that shape */
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 1), 8u << 20);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 2 << 20, 0), 4u << 20);
  ck_assert_uint_eq(pcl_registry_plans_hash(r, 2, 2, 0), h);
  ck_assert_uint_ne(pcl_registry_plans_hash(r, 2, 2, 1), h);
  int tuned = -1;
  pcl_registry_call_t c = call(65536);
  ck_assert_str_eq(sel(r, c, &tuned), "NCCL"); /* the table's range */
  ck_assert_int_eq(tuned, 1);
  c.untuned = 1;
  ck_assert_str_eq(sel(r, c, &tuned), "a_wide");
  ck_assert_int_eq(tuned, 0);
  c = call(4096);
  c.untuned = 1;
  ck_assert_str_ne(sel(r, c, NULL), "extra"); /* tuned-only: never by the untuned rules */
  ck_assert_uint_eq(pcl_registry_tuning_hash(NULL, 2, 2), none);
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A file measured elsewhere: the check says why and the registry stays untuned. */
START_TEST(test_stale_identity_ignored) {
  pcl_registry_t *r = create_tuned();
  uint64_t h = pcl_registry_plans_hash(r, 2, 2, 1);
  pcl_tune_t *t = tune_good();
  pcl_tune_identity_t here = tune_here();
  here.plans_digest = pcl_registry_plans_digest(r);
  char why[512], want[512];
  int ok = pcl_tune_identity_check(t, &here, why, sizeof(why));
  ck_assert_int_eq(ok, 0);
  snprintf(want, sizeof(want), "plans_digest is '%016llx' here, '00000000000000aa' in the file",
           (unsigned long long)here.plans_digest);
  ck_assert_str_eq(why, want);
  pcl_registry_set_tuning(r, t, ok);
  int tuned = -1;
  ck_assert_str_eq(sel(r, call(1024), &tuned), "b_narrow");
  ck_assert_int_eq(tuned, 0);
  ck_assert_str_eq(sel(r, call(8192), &tuned), "a_wide");
  ck_assert_uint_eq(pcl_registry_plans_hash(r, 2, 2, 1), h);
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A winner that is not loaded, or that cannot serve the entry's calls, is passed over: its range
 * keeps the untuned rules and the others apply. */
START_TEST(test_name_not_loaded) {
  pcl_registry_t *r = create_tuned();
  char *text = tune_text("\"path\": \"a_wide\"", "\"path\": \"gone\"");
  set_table(r, text);
  free(text);
  int tuned = -1;
  ck_assert_str_eq(sel(r, call(1024), &tuned), "b_narrow");
  ck_assert_int_eq(tuned, 0);
  ck_assert_str_eq(sel(r, call(3072), &tuned), "extra");
  ck_assert_int_eq(tuned, 1);
  /* The same shape out of place: every plan is in place and none may run out of place. */
  text = tune_text("\"inplace\": true", "\"inplace\": false");
  set_table(r, text);
  free(text);
  pcl_registry_call_t c = call(3072);
  c.inplace = 0;
  ck_assert_str_eq(sel(r, c, &tuned), "NCCL");
  ck_assert_int_eq(tuned, 0);
  c.bytes = 8192;
  ck_assert_str_eq(sel(r, c, &tuned), "NCCL"); /* its NCCL range still applies */
  ck_assert_int_eq(tuned, 1);
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Ranks compare the hash: it changes with what the table decides for (world, ranks per node),
 * not with the measured times, nor with entries for other worlds. */
START_TEST(test_plans_hash_follows_table) {
  pcl_registry_t *r1 = create_tuned(), *r2 = create_tuned();
  uint64_t h0 = pcl_registry_plans_hash(r1, 2, 2, 1);
  ck_assert_uint_eq(pcl_registry_plans_hash(r2, 2, 2, 1), h0);
  set_table(r1, TUNE_GOOD);
  uint64_t h1 = pcl_registry_plans_hash(r1, 2, 2, 1);
  ck_assert_uint_ne(h1, h0);
  char *slower = tune_text("\"us\": 9.5", "\"us\": 19.5");
  set_table(r2, slower);
  ck_assert_uint_eq(pcl_registry_plans_hash(r2, 2, 2, 1), h1);
  char *moved = tune_text("\"max\": 65536", "\"max\": 32768");
  set_table(r2, moved);
  ck_assert_uint_ne(pcl_registry_plans_hash(r2, 2, 2, 1), h1);
  char *winner = tune_text("\"path\": \"a_wide\"", "\"path\": \"b_narrow\"");
  set_table(r2, winner);
  ck_assert_uint_ne(pcl_registry_plans_hash(r2, 2, 2, 1), h1);
  char *other = tune_text("\"world\": 2, \"ranks_per_node\": 2", "\"world\": 4, "
                                                                 "\"ranks_per_node\": 4");
  set_table(r2, other);
  ck_assert_uint_eq(pcl_registry_plans_hash(r2, 2, 2, 1), h0);
  free(slower);
  free(moved);
  free(winner);
  free(other);
  pcl_registry_destroy(r1);
  pcl_registry_destroy(r2);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The digest a file's identity carries: every loaded plan, in any order, tuned-only included. */
START_TEST(test_plans_digest) {
  char a[256], b[256];
  load_template();
  make_dir(a, sizeof(a), "dig_a");
  make_dir(b, sizeof(b), "dig_b");
  write_plan(a, "p.json", "p", 1, 0, 4096, NULL);
  write_plan(b, "q.json", "q", 1, 0, 8192, NULL);
  const char *ab[] = {a, b}, *ba[] = {b, a}, *only_a[] = {a}, *only_b[] = {b};
  pcl_registry_t *r1 = create(ab, 2), *r2 = create(ba, 2), *r3 = create(only_a, 1);
  uint64_t d = pcl_registry_plans_digest(r1);
  ck_assert_uint_eq(pcl_registry_plans_digest(r2), d);
  ck_assert_uint_ne(pcl_registry_plans_digest(r3), d);
  ck_assert_int_eq(pcl_registry_add_tuned_only(r3, only_b, 1), ncclSuccess);
  ck_assert_uint_eq(pcl_registry_plans_digest(r3), d);
  pcl_registry_destroy(r3);
  write_plan(b, "q.json", "q", 1, 0, 8192, "\"priority\": 1,\n");
  r3 = create(ab, 2);
  ck_assert_uint_ne(pcl_registry_plans_digest(r3), d);
  pcl_registry_destroy(r1);
  pcl_registry_destroy(r2);
  pcl_registry_destroy(r3);
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("registry_tune");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tuned_ranges_applied);
  tcase_add_test(tc, test_tuned_shape_exact);
  tcase_add_test(tc, test_tuned_only_counts_when_named);
  tcase_add_test(tc, test_untuned_communicator);
  tcase_add_test(tc, test_stale_identity_ignored);
  tcase_add_test(tc, test_name_not_loaded);
  tcase_add_test(tc, test_plans_hash_follows_table);
  tcase_add_test(tc, test_plans_digest);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
