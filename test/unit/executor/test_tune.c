/* SPDX-License-Identifier: MIT
 * Tuning files: the reader (a good file's fields; each kind of malformed file refused with its
 * exact "file: json.path: reason"), the identity check and its reason, and where the file is
 * looked for. */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <stdlib.h>
#include <unistd.h>

#include "tune_test_util.h"

/* TUNE_GOOD with `from` replaced by `to` must be refused with exactly `want`, leaving nothing. */
static void refused(const char *from, const char *to, const char *want) {
  char err[512];
  char *text = tune_text(from, to);
  pcl_tune_t *t = (pcl_tune_t *)1;
  ck_assert_int_eq(tune_parse(text, &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_ptr_null(t);
  ck_assert_str_eq(err, want);
  free(text);
}

START_TEST(test_good_file_parsed) {
  pcl_tune_t *t = tune_good();
  ck_assert_str_eq(t->file, "t.json");
  ck_assert_str_eq(t->identity.gpu, "NVIDIA H200");
  ck_assert_int_eq(t->identity.gpus, 8);
  ck_assert_int_eq(t->identity.link, PCL_TUNE_LINK_NVLINK);
  ck_assert_str_eq(t->identity.nccl, "2.30.7");
  ck_assert_uint_eq(t->identity.plans_digest, 0xaa);
  ck_assert_int_eq(t->n_entries, 1);
  const pcl_tune_entry_t *e = &t->entries[0];
  ck_assert_int_eq(e->collective, PCL_PLAN_COLL_ALLREDUCE);
  ck_assert_int_eq(e->world, 2);
  ck_assert_int_eq(e->ranks_per_node, 2);
  ck_assert_int_eq(e->ranks_per_gpu, 1);
  ck_assert_int_eq(e->procs, PCL_TUNE_PROCS_THREADS);
  ck_assert_int_eq(e->inplace, 1);
  ck_assert_int_eq(e->registered, 0);
  ck_assert_int_eq(e->n_ranges, 3);
  ck_assert_uint_eq(e->ranges[0].min, 64);
  ck_assert_uint_eq(e->ranges[0].max, 2048);
  ck_assert_str_eq(e->ranges[0].path, "a_wide");
  ck_assert_int_eq(e->ranges[0].nccl, 0);
  ck_assert_double_eq(e->ranges[0].us, 5.4);
  ck_assert_str_eq(e->ranges[0].runner_up, "nccl");
  ck_assert_double_eq(e->ranges[0].runner_up_us, 6.25);
  ck_assert_ptr_null(e->ranges[1].runner_up); /* optional */
  ck_assert_int_eq(e->ranges[2].nccl, 1);
  ck_assert_double_eq(e->ranges[2].us, 9.5);
  ck_assert_ptr_null(e->ranges[2].plan); /* resolved only by a registry */
  pcl_tune_destroy(t);
  pcl_tune_destroy(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_not_json) {
  char err[512];
  pcl_tune_t *t = NULL;
  ck_assert_int_eq(tune_parse("hello", &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_str_eq(err, "t.json: (root): not JSON: starts with 'h' at line 1, column 1");
  ck_assert_int_eq(tune_parse("{\"planccl_tune\": 1,", &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_str_eq(err, "t.json: (root): invalid JSON at line 1, column 20 (byte 19): "
                        "parse error: premature EOF");
  ck_assert_int_eq(tune_parse(" \n", &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_str_eq(err, "t.json: (root): empty file: a tuning file is a JSON object");
  ck_assert_int_eq(tune_parse("[1, 2]", &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_str_eq(err, "t.json: (root): expected an object at the top level");
  ck_assert_ptr_null(t);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_wrong_type) {
  refused("\"gpus\": 8", "\"gpus\": \"8\"",
          "t.json: identity.gpus: expected an integer, got a string");
  refused("\"inplace\": true", "\"inplace\": 1",
          "t.json: entries[0].inplace: expected a boolean, got a number");
  refused("\"us\": 6}", "\"us\": \"fast\"}",
          "t.json: entries[0].ranges[1].us: expected a number, got a string");
  refused("\"us\": 6}", "\"us\": -6}",
          "t.json: entries[0].ranges[1].us: value -6 is not a finite non-negative number");
  refused("\"min\": 64,", "\"min\": 3.5,",
          "t.json: entries[0].ranges[0].min: expected an "
          "integer, got 3.5");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_missing_field) {
  refused(", \"us\": 6}", "}", "t.json: entries[0].ranges[1].us: missing required field");
  refused("\"ranks_per_gpu\": 1,", "", "t.json: entries[0].ranks_per_gpu: missing required field");
  refused("\"nccl\": \"2.30.7\", ", "", "t.json: identity.nccl: missing required field");
  refused("\"planccl_tune\": 1,", "", "t.json: planccl_tune: missing required field");
  refused(", \"runner_up_us\": 6.25", "",
          "t.json: entries[0].ranges[0].runner_up_us: missing required field");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_overlapping_ranges) {
  refused("\"min\": 2080", "\"min\": 2048",
          "t.json: entries[0].ranges[1].min: range [2048, 4096] overlaps ranges[0] [64, 2048]");
  refused("\"min\": 4128, \"max\": 65536", "\"min\": 16, \"max\": 65536",
          "t.json: entries[0].ranges[2].min: range [16, 65536] overlaps ranges[1] [2080, 4096]");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_unsorted_ranges) {
  refused("\"min\": 4128, \"max\": 65536", "\"min\": 16, \"max\": 24",
          "t.json: entries[0].ranges[2].min: range [16, 24] is out of order: it comes before "
          "ranges[1] [2080, 4096]");
  refused("\"min\": 64, \"max\": 2048", "\"min\": 4096, \"max\": 64",
          "t.json: entries[0].ranges[0].min: min 4096 > max 64");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refused_unknown_collective) {
  refused("\"allreduce\"", "\"allreduse\"",
          "t.json: entries[0].collective: unknown collective 'allreduse' (expected allreduce, "
          "allgather, reducescatter, broadcast or reduce)");
  refused("\"allreduce\"", "\"alltoall\"", /* a collective, but never planned */
          "t.json: entries[0].collective: unknown collective 'alltoall' (expected allreduce, "
          "allgather, reducescatter, broadcast or reduce)");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The rest of what a file may get wrong, one line each. */
START_TEST(test_refused_other) {
  static const struct {
    const char *from, *to, *want;
  } cases[] = {
      {"\"planccl_tune\": 1", "\"planccl_tune\": 2",
       "t.json: planccl_tune: format 2; this planccl reads format 1"},
      {"\"entries\"", "\"_note\": 1, \"entires\"", "t.json: entires: unknown field"},
      {"\"link\": \"nvlink\"", "\"link\": \"nvswitch\"",
       "t.json: identity.link: unknown link 'nvswitch' (expected nvlink, pcie or shared)"},
      {"\"threads\"", "\"mpi\"",
       "t.json: entries[0].process_model: unknown process_model 'mpi' (expected threads or "
       "processes)"},
      {"\"00000000000000aa\"", "\"0x12\"",
       "t.json: identity.plans_digest: expected 1 to 16 hex digits, got '0x12'"},
      {"\"world\": 2, \"ranks_per_node\": 2", "\"world\": 6, \"ranks_per_node\": 4",
       "t.json: entries[0].ranks_per_node: 6 ranks do not split into hosts of 4"},
      {"\"path\": \"extra\"", "\"path\": \"\"",
       "t.json: entries[0].ranges[1].path: empty name (a plan's name or \"nccl\")"},
      {"\"us\": 6}", "\"us\": 6, \"runner_up_us\": 7}",
       "t.json: entries[0].ranges[1].runner_up_us: given without runner_up"},
      {"\"ranges\": [", "\"ranges\": [], \"x\": [", "t.json: entries[0].x: unknown field"},
      {"\"gpu\": \"NVIDIA H200\"",
       "\"gpu\": \"NVIDIA H200 NVIDIA H200 NVIDIA H200 NVIDIA H200 "
       "NVIDIA H200 NVIDIA H200 NVIDIA H200 NVIDIA H200 NVIDIA H200 "
       "NVIDIA H200 NVIDIA H200\"",
       "t.json: identity.gpu: longer than 127 characters"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    refused(cases[i].from, cases[i].to, cases[i].want);
  /* The same call shape twice. */
  char *one = tune_text(" \"entries\": [\n  {", " \"entries\": [\n  {\"ranges\": [{\"min\": 0, "
                                                "\"max\": 8, \"path\": \"nccl\", \"us\": 1}], "
                                                "\"collective\": \"allreduce\", \"world\": 2, "
                                                "\"ranks_per_node\": 2, \"ranks_per_gpu\": 1, "
                                                "\"process_model\": \"threads\", \"inplace\": "
                                                "true, \"registered\": false},\n  {");
  char err[512];
  pcl_tune_t *t = NULL;
  ck_assert_int_eq(tune_parse(one, &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_str_eq(err, "t.json: entries[1]: the same call shape as entries[0]");
  free(one);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_identity_applies) {
  pcl_tune_t *t = tune_good();
  pcl_tune_identity_t here = tune_here();
  char why[256] = "untouched";
  ck_assert_int_eq(pcl_tune_identity_check(t, &here, why, sizeof(why)), 1);
  ck_assert_str_eq(why, "untouched");
  ck_assert_int_eq(pcl_tune_identity_check(t, NULL, NULL, 0), 0);
  pcl_tune_destroy(t);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Each differing fact is named with both values, in the file's order, in one line. */
START_TEST(test_identity_stale_reason) {
  pcl_tune_t *t = tune_good();
  pcl_tune_identity_t here = tune_here();
  char why[512];
  snprintf(here.gpu, sizeof(here.gpu), "NVIDIA H100 80GB HBM3");
  snprintf(here.nccl, sizeof(here.nccl), "2.28.9");
  ck_assert_int_eq(pcl_tune_identity_check(t, &here, why, sizeof(why)), 0);
  ck_assert_str_eq(why, "gpu is 'NVIDIA H100 80GB HBM3' here, 'NVIDIA H200' in the file; "
                        "nccl is '2.28.9' here, '2.30.7' in the file");
  here = tune_here();
  here.gpus = 2;
  here.link = PCL_TUNE_LINK_PCIE;
  here.plans_digest = 0x1234;
  ck_assert_int_eq(pcl_tune_identity_check(t, &here, why, sizeof(why)), 0);
  ck_assert_str_eq(why, "gpus is '2' here, '8' in the file; link is 'pcie' here, 'nvlink' in "
                        "the file; plans_digest is '0000000000001234' here, '00000000000000aa' "
                        "in the file");
  here = tune_here();
  snprintf(here.driver, sizeof(here.driver), "%s", "");
  ck_assert_int_eq(pcl_tune_identity_check(t, &here, why, sizeof(why)), 0);
  ck_assert_str_eq(why, "driver is '' here, '580.65.06' in the file");
  pcl_tune_destroy(t);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* What the library writes for planccl-tune (PLANCCL_TUNE_IDENTITY) reads back as the identity
 * it was made from, escapes and all; a short buffer gets the length it needs. */
START_TEST(test_identity_json_round_trip) {
  pcl_tune_identity_t id = tune_here();
  snprintf(id.gpu, sizeof(id.gpu), "GPU \"quoted\" \\ back\tslash");
  id.link = PCL_TUNE_LINK_SHARED;
  id.plans_digest = 0xfedcba9876543210ull;
  char json[1024], text[1200];
  size_t n = pcl_tune_identity_json(&id, json, sizeof(json));
  ck_assert_uint_eq(n, strlen(json));
  snprintf(text, sizeof(text), "{\"planccl_tune\": 1, \"identity\": %s, \"entries\": []}", json);
  pcl_tune_t *t = NULL;
  char err[256] = "";
  ck_assert_msg(tune_parse(text, &t, err, sizeof(err)) == ncclSuccess, "%s", err);
  ck_assert_str_eq(t->identity.gpu, id.gpu);
  ck_assert_int_eq(pcl_tune_identity_check(t, &id, NULL, 0), 1);
  id.gpus++;
  ck_assert_int_eq(pcl_tune_identity_check(t, &id, NULL, 0), 0);
  char small[16];
  ck_assert_uint_eq(pcl_tune_identity_json(&id, small, sizeof(small)), n);
  ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
  pcl_tune_destroy(t);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_search_paths) {
  pcl_tune_paths_t p;
  pcl_tune_search_paths("/etc/t.json", "/c", "/h", "/opt/pcl/lib", &p);
  ck_assert_int_eq(p.n, 1);
  ck_assert_int_eq(p.from_env, 1);
  ck_assert_str_eq(p.path[0], "/etc/t.json");
  pcl_tune_search_paths("NONE", "/c", "/h", "/opt/pcl/lib", &p);
  ck_assert_int_eq(p.n, 0);
  ck_assert_int_eq(p.from_env, 1);
  pcl_tune_search_paths("", "/c", "/h", "/opt/pcl/lib", &p);
  ck_assert_int_eq(p.n, 2);
  ck_assert_int_eq(p.from_env, 0);
  ck_assert_str_eq(p.path[0], "/c/planccl/tune.json");
  ck_assert_str_eq(p.path[1], "/opt/pcl/share/planccl/tune.json");
  pcl_tune_search_paths(NULL, "relative", "/h", NULL, &p); /* XDG ignores relative paths */
  ck_assert_int_eq(p.n, 1);
  ck_assert_str_eq(p.path[0], "/h/.cache/planccl/tune.json");
  pcl_tune_search_paths(NULL, NULL, NULL, NULL, &p);
  ck_assert_int_eq(p.n, 0);
}
END_TEST

/* The first candidate that exists is read; a missing one is passed over, a malformed one stops
 * the search with nothing applied. */
START_TEST(test_find_first_existing) {
  char dir[] = "/tmp/pcl_tune_XXXXXX", good[64], bad[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(good, sizeof(good), "%s/good.json", dir);
  snprintf(bad, sizeof(bad), "%s/bad.json", dir);
  FILE *f = fopen(good, "w");
  fputs(TUNE_GOOD, f);
  fclose(f);
  f = fopen(bad, "w");
  fputs("{\"planccl_tune\": 1}", f);
  fclose(f);
  pcl_tune_paths_t p = {.n = 2};
  snprintf(p.path[0], PATH_MAX, "%s/missing.json", dir);
  snprintf(p.path[1], PATH_MAX, "%s", good);
  pcl_tune_t *t = pcl_tune_find(&p);
  ck_assert_ptr_nonnull(t);
  ck_assert_str_eq(t->file, good);
  pcl_tune_destroy(t);
  snprintf(p.path[0], PATH_MAX, "%s", bad); /* refused: the good one after it is not read */
  ck_assert_ptr_null(pcl_tune_find(&p));
  snprintf(p.path[0], PATH_MAX, "%s", dir); /* a directory */
  ck_assert_ptr_null(pcl_tune_find(&p));
  char err[512];
  ck_assert_int_eq(pcl_tune_load(bad, &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(err, "bad.json: identity: missing required field"));
  ck_assert_int_eq(pcl_tune_load(p.path[0], &t, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(err, ": a directory, not a tuning file"));
  p.n = 0;
  ck_assert_ptr_null(pcl_tune_find(&p));
  unlink(good);
  unlink(bad);
  rmdir(dir);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_good_file_parsed);
  tcase_add_test(tc, test_refused_not_json);
  tcase_add_test(tc, test_refused_wrong_type);
  tcase_add_test(tc, test_refused_missing_field);
  tcase_add_test(tc, test_refused_overlapping_ranges);
  tcase_add_test(tc, test_refused_unsorted_ranges);
  tcase_add_test(tc, test_refused_unknown_collective);
  tcase_add_test(tc, test_refused_other);
  tcase_add_test(tc, test_identity_applies);
  tcase_add_test(tc, test_identity_stale_reason);
  tcase_add_test(tc, test_identity_json_round_trip);
  tcase_add_test(tc, test_search_paths);
  tcase_add_test(tc, test_find_first_existing);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
