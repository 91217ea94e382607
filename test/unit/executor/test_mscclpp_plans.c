/* SPDX-License-Identifier: MIT
 * MSCCL++'s own plans that the simulator does not pass (test/data/mscclpp_failing): each verdict
 * is the plan's defect, shown by the interleaving the simulator reports, by one call (or one
 * size) passing, and by the corrected plan passing; and the 14-refs plan planccl now takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pcl_test.h"
#include "plan.h"
#include "plan_test_util.h"
#include "sim.h"
#include "sim_test_util.h"

/* One explicit sequence: `nsizes` sizes, each run `calls` times in a row, seeds 0..nseeds-1. */
static pcl_sim_verdict_t run_seq(const pcl_plan_t *p, const uint64_t *sizes, int nsizes, int calls,
                                 int nseeds, pcl_sim_result_t *out) {
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  o.dtype = ncclFloat32;
  o.op = ncclSum;
  o.sizes = sizes;
  o.nsizes = nsizes;
  o.calls_per_size = calls;
  o.nseeds = nseeds;
  ck_assert_int_eq(pcl_sim_run(p, &o, out), ncclSuccess);
  return out->verdict;
}

static void expect_msg(const pcl_sim_result_t *r, const char *needle) {
  ck_assert_msg(strstr(r->message, needle), "'%s' not in: %s", needle, r->message);
}

/* The plan's text with `from` replaced by `to`, loaded (the fixed variant of a defective plan). */
static pcl_plan_t *load_fixed(const char *rel, const char *from, const char *to) {
  char path[512];
  char *text = read_text(plan_path(path, sizeof(path), rel), NULL);
  ck_assert_msg(text != NULL, "cannot read %s", path);
  ck_assert_msg(strstr(text, from), "%s: '%s' not found", rel, from);
  char *fixed = replace_all(text, from, to);
  pcl_plan_t *p = load_text(rel, fixed);
  free(text);
  free(fixed);
  return p;
}

START_TEST(test_mscclpp_ar_naive_single_scratch) {
  /* allreduce_naivy.py, 2 ranks, LL with ONE scratch (use_double_scratch_buffer false). Chunk
   * offsets follow each call's size (MSCCL++ too: lightLoadExecutionPlan per size, one scratch
   * per buffer allocation). When the size grows more than 1.5x between two calls, the rank that
   * finishes call k first writes call k+1's ppkt packets over scratch slots its peer still has to
   * unpack for call k: the peer's upkt spins on flag k forever (real GPUs hang the same way). */
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "../mscclpp_failing/ar_naive_2.json"));
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  /* 96 -> 224 (chunk 48 -> 112 B): rank 0's call-1 ppkt covers rank 1's scratch [0, 112) payload
   * and so rank 1's call-0 slot 2 at [96, 144), which rank 1's upkt has not read yet. */
  const uint64_t grow[] = {96, 224};
  ck_assert_int_eq(run_seq(p, grow, 2, 1, 4, r), PCL_SIM_DEADLOCK);
  expect_msg(r, "gpus[1].threadblocks[0].ops[3] (upkt) [call 0");
  expect_msg(r, "payload byte 96 of rank 1's scratch (found flag 2: from a later call)");
  expect_msg(r, "gpus[0].threadblocks[0].ops[1] (respkt) [call 1");
  /* 32 -> 64 (chunk 16 -> 32): rank 1's call-1 ppkt lands on rank 0's call-0 slot 3. */
  const uint64_t grow2[] = {32, 64};
  ck_assert_int_eq(run_seq(p, grow2, 2, 1, 4, r), PCL_SIM_DEADLOCK);
  expect_msg(r, "gpus[0].threadblocks[0].ops[3] (upkt) [call 0");
  expect_msg(r, "from a later call");
  /* The automatic size sweep (what CI would run) grows too. */
  ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 4, 0, r), PCL_SIM_DEADLOCK);
  expect_msg(r, "from a later call");
  /* Not a simulator artefact: one size repeated, or growth <= 1.5x, passes every schedule. */
  const uint64_t same[] = {96};
  ck_assert_int_eq(run_seq(p, same, 1, 8, 8, r), PCL_SIM_PASS);
  const uint64_t small_growth[] = {96, 128};
  ck_assert_int_eq(run_seq(p, small_growth, 2, 1, 8, r), PCL_SIM_PASS);
  pcl_plan_destroy(p);
  /* The fix: double scratch (call k+1 writes the other half; a rank reaching call k+2 proves its
   * peer finished call k). */
  p = load_fixed("../mscclpp_failing/ar_naive_2.json", "\"use_double_scratch_buffer\": false",
                 "\"use_double_scratch_buffer\": true");
  ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 6, 0, r), PCL_SIM_PASS);
  ck_assert_int_eq(run_seq(p, grow, 2, 1, 8, r), PCL_SIM_PASS);
  pcl_plan_destroy(p);
  pcl_free(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_mscclpp_mn_rs_unflushed_pws) {
  /* reducescatter.py 2x1 and 2x2: the port put-with-signal is never flushed, so a rank's kernel
   * can end (it waits only for the PEER's pws) while its own proxy has not read the source yet;
   * the next call (the host refilling the input, or the in-place rre of call k+1) overwrites it
   * and the peer receives the wrong call's bytes. The proxy's copy is asynchronous to the
   * kernel's stream in MSCCL++ too (CudaIpc: its own stream; IB: the NIC reads at DMA time). */
  char path[512];
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "../mscclpp_failing/mn_rs_1.json"));
  ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 4, 0, r), PCL_SIM_UNINIT);
  expect_msg(r, "gpus[0].threadblocks[0].ops[5] (pws): the proxy of rank 0 copies a source byte");
  expect_msg(r, "the host last wrote as input of call 1");
  /* One call alone is right: the defect is between calls. */
  const uint64_t one[] = {64};
  ck_assert_int_eq(run_seq(p, one, 1, 1, 8, r), PCL_SIM_PASS);
  pcl_plan_destroy(p);

  p = load_ok(plan_path(path, sizeof(path), "../mscclpp_failing/mn_rs_2.json"));
  ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 4, 0, r), PCL_SIM_UNINIT);
  expect_msg(r, "gpus[1].threadblocks[0].ops[12] (pws): the proxy of rank 1 copies a source byte");
  expect_msg(r, "gpus[1].threadblocks[0].ops[6] (rre) in call 1");
  ck_assert_int_eq(run_seq(p, one, 1, 1, 8, r), PCL_SIM_PASS);
  pcl_plan_destroy(p);

  /* The fix: put_with_signal_and_flush (or a flush before the kernel ends). */
  static const char *const files[] = {"../mscclpp_failing/mn_rs_1.json",
                                      "../mscclpp_failing/mn_rs_2.json"};
  for (int i = 0; i < 2; i++) {
    p = load_fixed(files[i], "\"name\": \"pws\"", "\"name\": \"pwsf\"");
    ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 6, 0, r), PCL_SIM_PASS);
    pcl_plan_destroy(p);
  }
  pcl_free(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_mscclpp_mn_rs_pkt_8_fourteen_refs) {
  /* reducescatter_pkt.py 2 x 8: MSCCL++'s fusion merged 7 peers x 2 chunks into one memory ppkt
   * of 14 (src, dst) pairs. planccl's ops take 16 refs per side (the interpreter's limit), so it
   * loads, infers its nodes (8 ranks each, from its memory channels) and simulates correctly. */
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "../mscclpp_failing/mn_rs_pkt_8.json"));
  ck_assert_int_eq(p->n_gpus, 16);
  ck_assert_int_eq(p->nranks_per_node, 8);
  ck_assert_int_eq(p->gpus[0].blocks[0].ops[0].n_src, 14);
  expect_ok(p, path, ncclFloat32, ncclSum, PCL_SIM_LL16, 16 << 10, 2, 0, 0);
  expect_ok(p, path, ncclBfloat16, ncclSum, PCL_SIM_LL8, 16 << 10, 2, 0, 0);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("mscclpp_plans");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_mscclpp_ar_naive_single_scratch);
  tcase_add_test(tc, test_mscclpp_mn_rs_unflushed_pws);
  tcase_add_test(tc, test_mscclpp_mn_rs_pkt_8_fourteen_refs);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
