/* SPDX-License-Identifier: MIT
 * The hang report in words (executor/exec/exec_hang.c): a kernel's record of what it waited for
 * (kernel_abi.h, pcl_khang_t) told as plan, block, op, buffer, flags and the peer op that writes
 * there, for every kind of wait, in communicator ranks for relabelled programs; no report,
 * unknown addresses and short buffers. No GPU. */
#include <stdio.h>
#include <string.h>
#include "pcl_test.h"
#include "exec.h"
#include "../kernels/plans_inline.h"

#define SCRATCH 0x7f0000000000ull
#define HALF 0x10000ull
#define SEMS 0x7f1000000000ull

typedef struct {
  pcl_plan_t *plan;
  pcl_plan_layout_t layout;
  pcl_exec_hang_where_t w;
  uint64_t tail[1], inbound[1];
  int peer[1];
} fixture_t;

static void setup(fixture_t *f, int rank) {
  char err[512] = "";
  memset(f, 0, sizeof(*f));
  ck_assert_int_eq(
      pcl_plan_load_buffer("t_ar_ll", plan_ar_ll, strlen(plan_ar_ll), &f->plan, err, sizeof(err)),
      ncclSuccess);
  /* 4 KiB in place: two chunks of 2 KiB, packets of chunk k at [k * 4096, k * 4096 + 4096). */
  ck_assert_int_eq(pcl_plan_layout(f->plan, rank, 4096, 4096, &f->layout), ncclSuccess);
  f->w.plan = f->plan;
  f->w.rank = rank;
  f->w.layout = &f->layout;
  f->w.kernel = "LL kernel";
  f->w.scratch = SCRATCH;
  f->w.scratch_half = HALF;
  f->w.sems = SEMS;
  f->w.nsems = 4;
  f->w.barriers = 0x7f2000000000ull;
  f->w.barrier_bytes = 256;
  f->tail[0] = 0x7f3000000000ull;
  f->inbound[0] = 0x7f3000001000ull;
  f->peer[0] = 3;
  f->w.nports = 1;
  f->w.port_tail = f->tail;
  f->w.port_inbound = f->inbound;
  f->w.port_peer = f->peer;
}

static pcl_khang_t report(uint32_t err, uint32_t op, uint32_t what, uint64_t at, uint32_t want,
                          uint32_t found) {
  pcl_khang_t h;
  memset(&h, 0, sizeof(h));
  h.valid = 1;
  h.err = err;
  h.block = 0;
  h.thread = 7;
  h.op = op;
  h.what = what;
  h.at = at;
  h.want = want;
  h.found = found;
  h.waited_ns = 1500000000ull;
  return h;
}

static void has(const char *s, const char *part) {
  ck_assert_msg(strstr(s, part) != NULL, "\"%s\" not in \"%s\"", part, s);
}

START_TEST(test_packet_wait_names_writer) {
  fixture_t f;
  char buf[1024];
  setup(&f, 0);
  /* respkt (op 1) polls its scratch chunk 0, which rank 1's ppkt (op 0) fills. */
  pcl_khang_t h = report(PCL_KERR_TIMEOUT, 1, PCL_KWAIT_LL16, SCRATCH + 0x100, 5, 4);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "rank 0: a kernel timed out after waiting 1.500 s");
  has(buf, "plan t_ar_ll (LL kernel), block 0, thread 7");
  has(buf, "op 1 (respkt over memory channels with rank 1)");
  has(buf, "its scratch at +0x100 (even half), written by rank 1 (block 0 op 0, ppkt)");
  has(buf, "flag 5");
  has(buf, "found flag 4 (an earlier call's: the writer has not reached this call)");
  h.found = 9;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "found flag 9 (a later call's: the ranks' calls are out of step)");
  /* Across the wrap (flag 1 follows 2^32 - 1): the writer's previous call, then a later one. */
  h.want = 1;
  h.found = 0xffffffffu;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "found flag 4294967295 (an earlier call's: the writer has not reached this call)");
  h.want = 0xfffffffeu;
  h.found = 1;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "found flag 1 (a later call's: the ranks' calls are out of step)");
  h.want = 500;
  h.found = 100;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "found flag 100 (a stale flag)");
  pcl_plan_destroy(f.plan);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A relabelled program (a broadcast/reduce root): the report names communicator ranks. Plan
 * rank 0 run by rank 1 (shift 1): its peer, plan rank 1, is rank 0. */
START_TEST(test_relabelled_ranks) {
  fixture_t f;
  char buf[1024];
  setup(&f, 0);
  f.w.shift = 1;
  pcl_khang_t h = report(PCL_KERR_TIMEOUT, 1, PCL_KWAIT_LL16, SCRATCH + 0x100, 5, 4);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "rank 1: a kernel timed out");
  has(buf, "op 1 (respkt over memory channels with rank 0)");
  has(buf, "written by rank 0 (block 0 op 0, ppkt)");
  pcl_plan_destroy(f.plan);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_odd_half_second_chunk) {
  fixture_t f;
  char buf[1024];
  setup(&f, 1);
  /* upkt (op 2) polls chunk 1 of the odd half, which rank 0's respkt (op 1) sends. */
  pcl_khang_t h = report(PCL_KERR_TIMEOUT, 2, PCL_KWAIT_LL16, SCRATCH + HALF + 0x1010, 9, 0);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "rank 1: ");
  has(buf, "op 2 (upkt)");
  has(buf, "+0x1010 (odd half)");
  has(buf, "written by rank 0 (block 0 op 1, respkt)");
  has(buf, "(nothing written there yet)");
  /* Past every chunk: nobody writes there. */
  h.at = SCRATCH + 0x3000;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "which no op of the plan writes as packets");
  pcl_plan_destroy(f.plan);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_ew_sem_barrier_port) {
  fixture_t f;
  char buf[1024];
  setup(&f, 0);
  pcl_khang_t h = report(PCL_KERR_TIMEOUT, PCL_KHANG_OP_EW, PCL_KWAIT_LL8, SCRATCH + 8, 3, 2);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "the block's fused elementwise program");
  has(buf, "an LL8 packet of flag 3");
  h = report(PCL_KERR_ABORT, 0, PCL_KWAIT_SEM, SEMS + 8, 1, 0);
  h.waited_ns = 0;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "a kernel was aborted: plan");
  has(buf, "semaphore 2 of the plan: wanted a count > 0, found 0");
  ck_assert_ptr_null(strstr(buf, "after waiting"));
  h = report(PCL_KERR_TIMEOUT, 0, PCL_KWAIT_BARRIER, 0x7f2000000010ull, 6, 6);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "a grid barrier of the context: generation 6 still 6");
  h = report(PCL_KERR_TIMEOUT, 0, PCL_KWAIT_FIFO, 0x7f3000000000ull, 12, 11);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "the FIFO of its port channel to rank 3");
  has(buf, "wanted position 12, found 11");
  h = report(PCL_KERR_TIMEOUT, 0, PCL_KWAIT_INBOUND, 0x7f3000001000ull, 4, 3);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "the inbound signals of its port channel from rank 3");
  h = report(PCL_KERR_ABORT, 0, PCL_KWAIT_NONE, 0, 0, 0);
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "no wait (a port-channel trigger refused by the abort)");
  pcl_plan_destroy(f.plan);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_unknown_and_bounds) {
  fixture_t f;
  char buf[1024];
  setup(&f, 0);
  pcl_khang_t h = report(PCL_KERR_TIMEOUT, 1, PCL_KWAIT_LL16, 0x1234560ull, 2, 1);
  /* No report yet: nothing said. */
  h.valid = 0;
  strcpy(buf, "stale");
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 0);
  ck_assert_str_eq(buf, "");
  ck_assert_int_eq(pcl_exec_hang_describe(NULL, &f.w, buf, sizeof(buf)), 0);
  h.valid = 1;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "device address 0x1234560");
  /* A program the context no longer knows, an op past the block's: still a report. */
  f.w.plan = NULL;
  f.w.layout = NULL;
  f.w.kernel = NULL;
  h.op = 40;
  h.at = SCRATCH + 0x100;
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, buf, sizeof(buf)), 1);
  has(buf, "plan (unknown program), block 0, thread 7, op 40, waiting on its scratch at +0x100");
  /* A short buffer is cut, never overrun. */
  char small[24];
  memset(small, 'x', sizeof(small));
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, small, 16), 1);
  ck_assert_uint_eq(strlen(small), 15);
  ck_assert_int_eq(small[16], 'x');
  ck_assert_int_eq(pcl_exec_hang_describe(&h, &f.w, small, 0), 0);
  pcl_plan_destroy(f.plan);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_hang");
  TCase *tc = tcase_create("describe");
  tcase_add_test(tc, test_packet_wait_names_writer);
  tcase_add_test(tc, test_odd_half_second_chunk);
  tcase_add_test(tc, test_relabelled_ranks);
  tcase_add_test(tc, test_ew_sem_barrier_port);
  tcase_add_test(tc, test_unknown_and_bounds);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
