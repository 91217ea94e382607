/* SPDX-License-Identifier: MIT
 * Plan layout math: message-size semantics per collective, chunk sizes, LL and double-scratch
 * sizing, runnable sizes (alignment x chunks, range ends, 4 GiB), thread-block-group slices and
 * pipeline iteration counts. */
#include <stdint.h>

#include "pcl_test.h"
#include "plan.h"
#include "plan_test_util.h"

static pcl_plan_t *load_ok(const char *rel) {
  char path[1024], err[1024];
  pcl_plan_t *p = NULL;
  ck_assert_msg(pcl_plan_load(plan_path(path, sizeof(path), rel), &p, err, sizeof(err)) ==
                    ncclSuccess,
                "%s", err);
  return p;
}

START_TEST(test_layout_ll_double) {
  pcl_plan_t *p = load_ok("good/ar2_ll.json");
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(p, 1, 1024, 1024, &l), ncclSuccess);
  ck_assert_int_eq(l.rank, 1);
  ck_assert_uint_eq(l.chunk_bytes, 512);
  ck_assert_uint_eq(l.buf_bytes[PCL_PLAN_BUF_INPUT], 1024);
  ck_assert_uint_eq(l.buf_bytes[PCL_PLAN_BUF_OUTPUT], 1024);
  ck_assert_uint_eq(l.buf_bytes[PCL_PLAN_BUF_SCRATCH], 1024); /* 2 chunks of payload */
  ck_assert_uint_eq(l.scratch_half_bytes, 2048);              /* LL: packets are 2x */
  ck_assert_uint_eq(l.scratch_bytes, 4096);                   /* double scratch */
  ck_assert_uint_eq(pcl_plan_chunk_offset(&l, PCL_PLAN_BUF_INPUT, 1), 512);
  ck_assert_uint_eq(pcl_plan_chunk_size(&l, PCL_PLAN_BUF_SCRATCH, 2), 1024);
  ck_assert_uint_eq(pcl_plan_scratch_bytes(p, 1024), 4096);
  /* Sizes that do not split are refused. */
  ck_assert_int_eq(pcl_plan_layout(p, 0, 48, 48, &l), ncclInvalidArgument);
  ck_assert_int_eq(pcl_plan_layout(p, 0, 64, 32, &l), ncclInvalidArgument);
  ck_assert_int_eq(pcl_plan_layout(p, 2, 64, 64, &l), ncclInvalidArgument);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_layout_simple) {
  pcl_plan_t *p = load_ok("good/ar2_simple.json");
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(p, 0, 4096, 4096, &l), ncclSuccess);
  ck_assert_uint_eq(l.chunk_bytes, 2048);
  ck_assert_uint_eq(l.scratch_half_bytes, 2048); /* 1 chunk, plain */
  ck_assert_uint_eq(l.scratch_bytes, 2048);      /* no double scratch */
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_size_semantics) {
  uint64_t in, out;
  pcl_plan_t *ag = load_ok("good/ag4_ll.json");
  ck_assert_int_eq(pcl_plan_buffer_bytes(ag, 4096, &in, &out), 0);
  ck_assert_uint_eq(in, 1024); /* allgather: size = total output */
  ck_assert_uint_eq(out, 4096);
  ck_assert_int_eq(pcl_plan_buffer_bytes(ag, 4098, &in, &out), -1);
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(ag, 3, in, out, &l), ncclSuccess);
  ck_assert_uint_eq(l.chunk_bytes, 1024);
  ck_assert_uint_eq(l.buf_bytes[PCL_PLAN_BUF_OUTPUT], 4096);
  ck_assert_uint_eq(l.scratch_bytes, 3 * 1024 * 2 * 2);
  ck_assert(pcl_plan_size_runnable(ag, 64));  /* 16 bytes per rank */
  ck_assert(!pcl_plan_size_runnable(ag, 96)); /* 24 bytes per rank: not aligned */
  ck_assert(pcl_plan_size_runnable(ag, 4u << 20));
  ck_assert(!pcl_plan_size_runnable(ag, (4u << 20) + 64)); /* above max */

  pcl_plan_t *rs = load_ok("good/rs2_ll.json");
  ck_assert_int_eq(pcl_plan_buffer_bytes(rs, 4096, &in, &out), 0);
  ck_assert_uint_eq(in, 4096); /* reducescatter: size = total input */
  ck_assert_uint_eq(out, 2048);
  ck_assert_int_eq(pcl_plan_layout(rs, 0, in, out, &l), ncclSuccess);
  ck_assert_uint_eq(l.chunk_bytes, 2048);
  ck_assert(pcl_plan_size_runnable(rs, 32));
  ck_assert(!pcl_plan_size_runnable(rs, 16));

  pcl_plan_t *ar = load_ok("good/ar4_ll.json");
  ck_assert_int_eq(pcl_plan_buffer_bytes(ar, 4096, &in, &out), 0);
  ck_assert_uint_eq(in, 4096); /* allreduce: size = count x element */
  ck_assert_uint_eq(out, 4096);
  pcl_plan_destroy(ag);
  pcl_plan_destroy(rs);
  pcl_plan_destroy(ar);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_runnable) {
  pcl_plan_t *p = load_ok("good/ar2_ll.json"); /* align 16, 2 chunks, [0, 1 MiB] */
  ck_assert(!pcl_plan_size_runnable(p, 0));    /* nothing to run */
  ck_assert(!pcl_plan_size_runnable(p, 16));   /* one alignment unit cannot make 2 chunks */
  ck_assert(pcl_plan_size_runnable(p, 32));
  ck_assert(!pcl_plan_size_runnable(p, 48));
  ck_assert(pcl_plan_size_runnable(p, 64));
  ck_assert(pcl_plan_size_runnable(p, 1 << 20));         /* max is inclusive */
  ck_assert(!pcl_plan_size_runnable(p, (1 << 20) + 32)); /* above max */
  pcl_plan_destroy(p);
  p = load_ok("good/ar4_ll.json");
  ck_assert(!pcl_plan_size_runnable(p, 32));
  ck_assert(pcl_plan_size_runnable(p, 64));
  pcl_plan_destroy(p);
  /* Unbounded range: buffers over 4 GiB cannot be addressed by the device's uint32 offsets. */
  p = load_ok("conformance/allreduce_packet_2.json");
  ck_assert(pcl_plan_size_runnable(p, 256u << 20));
  ck_assert(!pcl_plan_size_runnable(p, 8ull << 30));
  /* LL x2 and double x2 push the scratch past 4 GiB first: 4 scratch chunks of 512 MiB. */
  ck_assert(!pcl_plan_size_runnable(p, 2048ull << 20));
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_tbg_slice) {
  uint64_t off, len;
  pcl_plan_tbg_slice(48, 16, 0, 2, &off, &len);
  ck_assert_uint_eq(off, 0);
  ck_assert_uint_eq(len, 32); /* 3 units over 2 slices: the first gets the extra one */
  pcl_plan_tbg_slice(48, 16, 1, 2, &off, &len);
  ck_assert_uint_eq(off, 32);
  ck_assert_uint_eq(len, 16);
  pcl_plan_tbg_slice(64, 16, 3, 4, &off, &len);
  ck_assert_uint_eq(off, 48);
  ck_assert_uint_eq(len, 16);
  pcl_plan_tbg_slice(16, 16, 2, 3, &off, &len); /* fewer units than slices */
  ck_assert_uint_eq(len, 0);
  pcl_plan_tbg_slice(16, 16, 0, 3, &off, &len);
  ck_assert_uint_eq(len, 16);
  pcl_plan_tbg_slice(100, 16, 0, 1, &off, &len);
  ck_assert_uint_eq(off, 0);
  ck_assert_uint_eq(len, 100);
  /* Slices tile the range exactly. */
  for (uint32_t n = 1; n <= 7; n++) {
    uint64_t next = 0;
    for (uint32_t i = 0; i < n; i++) {
      pcl_plan_tbg_slice(16 * 23, 16, i, n, &off, &len);
      ck_assert_uint_eq(off, next);
      next = off + len;
    }
    ck_assert_uint_eq(next, 16 * 23);
  }
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_pipeline_iters) {
  pcl_plan_t *p = load_ok("good/ar2_pipeline_sem.json"); /* unit 4096, num_chunks 1 */
  const pcl_plan_op_t *pipe = &p->gpus[0].blocks[0].ops[2];
  ck_assert_int_eq(pipe->type, PCL_PLAN_OP_PIPELINE);
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(p, 0, 8192, 8192, &l), ncclSuccess);
  ck_assert_uint_eq(pcl_plan_pipeline_iters(&l, pipe), 1);
  ck_assert_int_eq(pcl_plan_layout(p, 0, 16384, 16384, &l), ncclSuccess);
  ck_assert_uint_eq(pcl_plan_pipeline_iters(&l, pipe), 2);
  ck_assert_int_eq(pcl_plan_layout(p, 0, 16416, 16416, &l), ncclSuccess);
  ck_assert_uint_eq(pcl_plan_pipeline_iters(&l, pipe), 3);
  ck_assert_int_eq(pcl_plan_layout(p, 0, 64, 64, &l), ncclSuccess);
  ck_assert_uint_eq(pcl_plan_pipeline_iters(&l, pipe), 1);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_scratch_bound) {
  pcl_plan_t *p = load_ok("good/ar2_ll.json");
  /* 1 MiB: chunk 512 KiB, 2 scratch chunks, x2 LL, x2 double. */
  ck_assert_uint_eq(pcl_plan_scratch_bytes_bound(p, 1 << 20), 4u << 20);
  ck_assert_uint_eq(pcl_plan_scratch_bytes_bound(p, 1u << 30), 4u << 20);    /* clamped to max */
  ck_assert_uint_eq(pcl_plan_scratch_bytes_bound(p, 1000), 2 * 496 * 2 * 2); /* aligned down */
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ar2_simple stages one chunk (half the message) in scratch, up to 1 GiB. */
START_TEST(test_segments) {
  pcl_plan_t *p = load_ok("good/ar2_simple.json");
  const uint64_t M = 1u << 20;
  ck_assert_uint_eq(pcl_plan_scratch_bytes(p, 64 * M), 32 * M);
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 4 * M, 4 * M), 4 * M); /* fits: one segment */
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 64 * M, 8 * M), 16 * M);
  /* 67 MiB in 8 MiB of scratch: at most 16 MiB a segment, so 5 of them, evened out to 14 MiB
   * (the last 11 MiB) rather than four of 16 and a last of 3. */
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 67 * M, 8 * M), 14 * M);
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 64 * M, M / 4), 0); /* no aligned segment fits */
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 3, 8 * M), 0);      /* not runnable */
  /* Only elementwise collectives split: an allgather's chunks interleave the ranks' parts. */
  p->collective = PCL_PLAN_COLL_ALLGATHER;
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 64 * M, 8 * M), 0);
  p->collective = PCL_PLAN_COLL_BROADCAST;
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 64 * M, 8 * M), 16 * M);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The shipped 8-rank Simple reduce: the root's scratch holds 7 inputs, over 4 GiB above 585 MiB.
 * Such messages cannot run whole, but they are selected and split into segments of whatever
 * scratch the communicator has; before, the plan's range had to stop at 512 MiB. */
START_TEST(test_segments_beyond_whole) {
  pcl_plan_t *p = load_ok("../../../plans/extra/reduce/8gpu_simple_outofplace.json");
  const uint64_t M = 1u << 20;
  ck_assert_uint_eq(p->max_message_size, 1024 * M);
  ck_assert(pcl_plan_size_runnable(p, 585 * M) && pcl_plan_size_selectable(p, 585 * M));
  ck_assert(!pcl_plan_size_runnable(p, 586 * M) && pcl_plan_size_selectable(p, 586 * M));
  ck_assert_uint_eq(pcl_plan_scratch_bytes(p, 586 * M), 0); /* not runnable whole */
  ck_assert(pcl_plan_size_selectable(p, 1024 * M) && !pcl_plan_size_selectable(p, 1025 * M));
  /* 64 MiB of scratch: 9 MiB segments (7 x 9 = 63 MiB); in 4 GiB, two near-halves. */
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 1024 * M, 64 * M), 9 * M);
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 600 * M, 64 * M), 9 * M);
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 600 * M, 0xffffffffull), 300 * M);
  ck_assert_uint_eq(pcl_plan_segment_bytes(p, 600 * M + 8, 64 * M), 0); /* not a 16 multiple */
  /* Only elementwise collectives split: beyond its whole range, a gathering plan is not chosen. */
  p->collective = PCL_PLAN_COLL_ALLGATHER;
  ck_assert(!pcl_plan_size_selectable(p, 600 * M));
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan_layout");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_layout_ll_double);
  tcase_add_test(tc, test_layout_simple);
  tcase_add_test(tc, test_size_semantics);
  tcase_add_test(tc, test_runnable);
  tcase_add_test(tc, test_tbg_slice);
  tcase_add_test(tc, test_pipeline_iters);
  tcase_add_test(tc, test_scratch_bound);
  tcase_add_test(tc, test_segments);
  tcase_add_test(tc, test_segments_beyond_whole);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
