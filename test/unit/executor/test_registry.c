/* SPDX-License-Identifier: MIT
 * Plan registry: directory scanning (recursive, sorted, refused files reported) and the
 * selection table: collective/world/ranks-per-node match, in-place rules, inclusive ranges and
 * runnable sizes, then priority, narrowest range, file order and directory order. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry_test_util.h"

/* The registry of the shipped plans' directory plans/<sub>. */
static pcl_registry_t *create_shipped(const char *sub) {
  const char *src = getenv("PCL_SOURCE_DIR");
  char d[1024];
  snprintf(d, sizeof(d), "%s/plans/%s", src != NULL ? src : PCL_TEST_SOURCE_DIR, sub);
  const char *dirs[] = {d};
  return create(dirs, 1);
}

static const char *sel_name(const pcl_registry_t *r, int inplace, uint64_t bytes) {
  const pcl_plan_t *p = pcl_registry_select(r, PCL_PLAN_COLL_ALLREDUCE, 2, 2, inplace, bytes);
  return p ? p->name : "(none)";
}

START_TEST(test_priority_then_narrowest_then_order) {
  load_template();
  char d[256];
  make_dir(d, sizeof(d), "sel");
  write_plan(d, "a_wide.json", "a_wide", 1, 0, 1 << 20, NULL);
  write_plan(d, "b_narrow.json", "b_narrow", 1, 0, 4096, NULL);
  write_plan(d, "c_prio.json", "c_prio", 1, 8192, 65536, "\"priority\": 5,\n");
  write_plan(d, "d_same_as_b.json", "d_same_as_b", 1, 0, 4096, NULL);
  const char *dirs[] = {d};
  pcl_registry_t *r = create(dirs, 1);
  ck_assert_int_eq(pcl_registry_count(r), 4);
  ck_assert_int_eq(pcl_registry_refused_count(r), 0);
  ck_assert_str_eq(sel_name(r, 1, 1024), "b_narrow"); /* narrowest; b before d (file order) */
  ck_assert_str_eq(sel_name(r, 1, 4096), "b_narrow"); /* max inclusive */
  ck_assert_str_eq(sel_name(r, 1, 4128), "a_wide");   /* just above b's range */
  ck_assert_str_eq(sel_name(r, 1, 8160), "a_wide");   /* just below c's range */
  ck_assert_str_eq(sel_name(r, 1, 8192), "c_prio");   /* min inclusive, priority wins */
  ck_assert_str_eq(sel_name(r, 1, 65536), "c_prio");
  ck_assert_str_eq(sel_name(r, 1, 65568), "a_wide");
  ck_assert_str_eq(sel_name(r, 1, 1 << 20), "a_wide");
  ck_assert_str_eq(sel_name(r, 1, (1 << 20) + 32), "(none)");
  ck_assert_str_eq(sel_name(r, 1, 1040), "(none)"); /* in range but not a multiple of 32 */
  ck_assert_str_eq(sel_name(r, 1, 0), "(none)");
  /* Iteration is in selection order: sorted file names. */
  ck_assert_str_eq(pcl_registry_plan(r, 0)->name, "a_wide");
  ck_assert_str_eq(pcl_registry_plan(r, 3)->name, "d_same_as_b");
  ck_assert_ptr_null(pcl_registry_plan(r, 4));
  /* Other worlds, ranks per node and collectives do not match. */
  ck_assert_ptr_null(pcl_registry_select(r, PCL_PLAN_COLL_ALLREDUCE, 4, 4, 1, 1024));
  ck_assert_ptr_null(pcl_registry_select(r, PCL_PLAN_COLL_ALLREDUCE, 2, 1, 1, 1024));
  ck_assert_ptr_null(pcl_registry_select(r, PCL_PLAN_COLL_ALLGATHER, 2, 2, 1, 1024));
  pcl_registry_destroy(r);
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_inplace_rules) {
  load_template();
  char d[256];
  make_dir(d, sizeof(d), "inpl");
  write_plan(d, "inplace.json", "inplace", 1, 0, 1 << 20, NULL);
  const char *dirs[] = {d};
  pcl_registry_t *r = create(dirs, 1);
  ck_assert_str_eq(sel_name(r, 1, 1024), "inplace");
  ck_assert_str_eq(sel_name(r, 0, 1024), "(none)"); /* never guess */
  pcl_registry_destroy(r);

  write_plan(d, "oop_ok.json", "oop_ok", 1, 0, 1 << 20, "\"outofplace_ok\": true,\n");
  write_plan(d, "zz_oop.json", "zz_oop", 0, 0, 4096, NULL);
  r = create(dirs, 1);
  ck_assert_str_eq(sel_name(r, 1, 1024), "inplace"); /* first in file order */
  ck_assert_str_eq(sel_name(r, 0, 1024), "zz_oop");  /* narrower out-of-place plan */
  ck_assert_str_eq(sel_name(r, 0, 8192), "oop_ok");  /* in-place plan that allows it */
  pcl_registry_destroy(r);
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_dir_order_recursion_refusals) {
  load_template();
  char d1[256], d2[256], sub[300], bad[300];
  make_dir(d1, sizeof(d1), "d1");
  make_dir(d2, sizeof(d2), "d2");
  /* d2's file sorts first by name, but d1 comes first in the directory list. */
  write_plan(d1, "z.json", "from_d1", 1, 0, 1 << 20, NULL);
  write_plan(d2, "a.json", "from_d2", 1, 0, 1 << 20, NULL);
  snprintf(sub, sizeof(sub), "%s/nested", d2);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  write_plan(sub, "n.json", "nested_narrow", 1, 0, 2048, NULL);
  write_plan(d2, ".hidden.json", "hidden", 1, 0, 64, NULL);
  write_plan(d2, "not_a_plan.txt", "txt", 1, 0, 64, NULL);
  snprintf(bad, sizeof(bad), "%s/broken.json", d2);
  FILE *f = fopen(bad, "w");
  fputs("{\"name\": 3}", f);
  fclose(f);
  const char *dirs[] = {d1, "/nonexistent/planccl", d2};
  pcl_registry_t *r = create(dirs, 3);
  ck_assert_int_eq(pcl_registry_count(r), 3);
  ck_assert_str_eq(pcl_registry_plan(r, 0)->name, "from_d1");
  ck_assert_str_eq(pcl_registry_plan(r, 1)->name, "from_d2");
  ck_assert_str_eq(pcl_registry_plan(r, 2)->name, "nested_narrow");
  ck_assert_str_eq(sel_name(r, 1, 65536), "from_d1");
  ck_assert_str_eq(sel_name(r, 1, 1024), "nested_narrow");
  ck_assert_int_eq(pcl_registry_refused_count(r), 1);
  ck_assert_ptr_nonnull(strstr(pcl_registry_refused(r, 0), "broken.json: name: expected a string"));
  ck_assert_ptr_null(pcl_registry_refused(r, 1));
  pcl_registry_destroy(r);
  /* Reversed directory order flips the tie. */
  const char *rev[] = {d2, d1};
  r = create(rev, 2);
  ck_assert_str_eq(sel_name(r, 1, 65536), "from_d2");
  pcl_registry_destroy(r);
  /* Empty registry and NULL handling. */
  r = create(NULL, 0);
  ck_assert_int_eq(pcl_registry_count(r), 0);
  ck_assert_str_eq(sel_name(r, 1, 1024), "(none)");
  pcl_registry_destroy(r);
  pcl_registry_destroy(NULL);
  ck_assert_ptr_null(pcl_registry_select(NULL, PCL_PLAN_COLL_ALLREDUCE, 2, 2, 1, 1024));
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_max_scratch) {
  load_template();
  char d[256];
  make_dir(d, sizeof(d), "scr");
  write_plan(d, "a.json", "a", 1, 0, 1 << 20, NULL);
  write_plan(d, "b.json", "b", 1, 0, 4096, NULL);
  const char *dirs[] = {d};
  pcl_registry_t *r = create(dirs, 1);
  /* 1 MiB through a: chunk 512 KiB, 2 scratch chunks, x2 LL, x2 double. */
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 1 << 20, 1), 4u << 20);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 1u << 30, 1), 4u << 20);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 2, 2, 4096, 1), 4 * 4096);
  ck_assert_uint_eq(pcl_registry_max_scratch_bytes(r, 4, 4, 1 << 20, 1), 0);
  pcl_registry_destroy(r);
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* What a communicator asks the registry before creating transports: the channels per peer and
 * the hash ranks compare to agree on one plan set. */
START_TEST(test_channels_and_hash) {
  load_template();
  char d1[256], d2[256], d3[256];
  make_dir(d1, sizeof(d1), "h1");
  make_dir(d2, sizeof(d2), "h2");
  make_dir(d3, sizeof(d3), "h3");
  write_plan(d1, "a.json", "a", 1, 0, 4096, NULL);
  write_plan(d2, "a.json", "a", 1, 0, 4096, NULL);
  write_plan(d3, "a.json", "a", 1, 0, 4096, "\"priority\": 5,\n");
  const char *dirs1[] = {d1}, *dirs2[] = {d2}, *dirs3[] = {d3};
  pcl_registry_t *r1 = create(dirs1, 1), *r2 = create(dirs2, 1), *r3 = create(dirs3, 1);
  /* ar2_ll: one memory channel from each rank to its peer, no port channel. */
  ck_assert_int_eq(pcl_registry_max_channels_per_peer(r1, 2, 2, PCL_PLAN_CHAN_MEMORY, 1, 1), 1);
  ck_assert_int_eq(pcl_registry_max_channels_per_peer(r1, 2, 2, PCL_PLAN_CHAN_MEMORY, 3, 1), 3);
  ck_assert_int_eq(pcl_registry_max_channels_per_peer(r1, 2, 2, PCL_PLAN_CHAN_PORT, 0, 1), 0);
  ck_assert_int_eq(pcl_registry_max_channels_per_peer(r1, 4, 4, PCL_PLAN_CHAN_MEMORY, 1, 1), 1);
  uint64_t h1 = pcl_registry_plans_hash(r1, 2, 2, 1);
  ck_assert_uint_eq(h1, pcl_registry_plans_hash(r2, 2, 2, 1));
  ck_assert_uint_ne(h1, pcl_registry_plans_hash(r3, 2, 2, 1)); /* another priority */
  ck_assert_uint_ne(h1, pcl_registry_plans_hash(r1, 4, 4, 1)); /* no plan for 4 ranks */
  ck_assert_uint_eq(pcl_registry_plans_hash(r1, 4, 4, 1), pcl_registry_plans_hash(r3, 4, 4, 1));
  pcl_registry_destroy(r1);
  pcl_registry_destroy(r2);
  pcl_registry_destroy(r3);
  free(template_text);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_test_data_tree) {
  char d[1024];
  const char *dirs[] = {plan_path(d, sizeof(d), "")};
  pcl_registry_t *r = create(dirs, 1);
  /* good/ (11) + conformance/ (8 valid); bad/ (77) + 3 NVLS conformance plans refused. */
  ck_assert_int_ge(pcl_registry_count(r), 19);
  ck_assert_int_ge(pcl_registry_refused_count(r), 80);
  const pcl_plan_t *p = pcl_registry_select(r, PCL_PLAN_COLL_ALLREDUCE, 2, 2, 1, 1024);
  ck_assert_ptr_nonnull(p);
  /* conformance/allreduce_packet_2 sorts first but has an unbounded range: narrower wins. */
  ck_assert_str_eq(p->name, "test_ar2_ll");
  p = pcl_registry_select(r, PCL_PLAN_COLL_REDUCESCATTER, 2, 2, 0, 4096);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p->name, "test_rs2_ll");
  p = pcl_registry_select(r, PCL_PLAN_COLL_ALLGATHER, 4, 4, 0, 4096);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p->name, "test_ag4_ll");
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The shipped 2-GPU allreduce plans: above the default set only the opt-in ones match, and the
 * zero-copy plan (registered buffers only) is a candidate for registered buffers alone. */
START_TEST(test_registered_only_plans) {
  pcl_registry_t *r = create_shipped("extra/allreduce");
  int zero_copy = 0;
  for (int i = 0; i < pcl_registry_count(r); i++) {
    const pcl_plan_t *p = pcl_registry_plan(r, i);
    ck_assert_int_eq(p->needs_userbuf, strstr(p->name, "zerocopy") != NULL);
    zero_copy += p->needs_userbuf;
  }
  ck_assert_int_eq(zero_copy, 6); /* 2, 4, 8 ranks, in and out of place */
  /* 64 MiB: the pipelined Simple plan (priority -2) unregistered, zero-copy (-1) registered. */
  const uint64_t big = 64ull << 20;
  const pcl_plan_t *p = pcl_registry_select_for(r, PCL_PLAN_COLL_ALLREDUCE, 2, 2, 0, big, 0);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p->name, "allreduce_2gpu_simple_pipe_outofplace");
  p = pcl_registry_select_for(r, PCL_PLAN_COLL_ALLREDUCE, 2, 2, 0, big, 1);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p->name, "allreduce_2gpu_zerocopy_outofplace");
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A port recspkt reads its sources and writes its plain result in the kernel; the proxy moves
 * only the packet copy in scratch. So the hierarchical reduce-scatter plans, whose port ops are
 * recspkt over the user's input and output, run on unregistered buffers (before, every local
 * buffer named by a port op counted, and such calls went to NCCL). */
START_TEST(test_port_recspkt_unregistered) {
  pcl_registry_t *r = create_shipped("extra/reducescatter");
  int hier = 0;
  for (int i = 0; i < pcl_registry_count(r); i++) {
    const pcl_plan_t *p = pcl_registry_plan(r, i);
    ck_assert_msg(!p->needs_userbuf, "%s needs registered buffers", p->name);
    hier += strstr(p->name, "hier") != NULL;
  }
  ck_assert_int_ge(hier, 6); /* 2 x 2, 2 x 4, 4 x 2, in and out of place at least */
  const struct {
    int world, rpn, inplace;
    const char *name;
  } want[] = {{8, 4, 0, "reducescatter_2x4gpu_hier_ll_outofplace"},
              {8, 4, 1, "reducescatter_2x4gpu_hier_ll_inplace"},
              {8, 2, 0, "reducescatter_4x2gpu_hier_ll_outofplace"},
              {8, 2, 1, "reducescatter_4x2gpu_hier_ll_inplace"}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const pcl_plan_t *p = pcl_registry_select_for(r, PCL_PLAN_COLL_REDUCESCATTER, want[i].world,
                                                  want[i].rpn, want[i].inplace, 512, 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->name, want[i].name);
  }
  pcl_registry_destroy(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("registry");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_priority_then_narrowest_then_order);
  tcase_add_test(tc, test_inplace_rules);
  tcase_add_test(tc, test_dir_order_recursion_refusals);
  tcase_add_test(tc, test_max_scratch);
  tcase_add_test(tc, test_channels_and_hash);
  tcase_add_test(tc, test_test_data_tree);
  tcase_add_test(tc, test_registered_only_plans);
  tcase_add_test(tc, test_port_recspkt_unregistered);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
