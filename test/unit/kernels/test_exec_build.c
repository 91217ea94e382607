/* SPDX-License-Identifier: MIT
 * CPU tests of the executor's program building: op translation, chunk -> byte offsets,
 * thread-block-group slices, pipeline flattening and iteration counts, remote-buffer slots and
 * the per-shape facts (packet/reduce alignment) that decide what a call may run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pcl_test.h"
#include "exec.h"
#include "plans_inline.h"

static pcl_plan_t *load(const char *name, const char *json) {
  char err[512] = "";
  pcl_plan_t *p = NULL;
  ncclResult_t res = pcl_plan_load_buffer(name, json, strlen(json), &p, err, sizeof(err));
  ck_assert_msg(res == ncclSuccess && p != NULL, "plan %s refused: %s", name, err);
  return p;
}

static pcl_kblock_t *build(const pcl_plan_t *p, int rank, uint64_t in, uint64_t out) {
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(p, rank, in, out, &l), ncclSuccess);
  pcl_kblock_t *b = pcl_calloc((size_t)p->max_blocks, sizeof(*b), "test blocks");
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(pcl_exec_build_blocks(p, rank, &l, NULL, b), ncclSuccess);
  return b;
}

static void ref_is(const pcl_kref_t *r, uint32_t off, uint32_t size, int kind) {
  ck_assert_uint_eq(r->offset, off);
  ck_assert_uint_eq(r->size, size);
  ck_assert_int_eq(r->kind, kind);
}

START_TEST(test_abi_sizes) {
  ck_assert_uint_eq(sizeof(pcl_ll16_packet_t), 16);
  ck_assert_uint_eq(sizeof(pcl_ll8_packet_t), 8);
  ck_assert_uint_le(sizeof(pcl_kblock_t), 16 * 1024);
  ck_assert_uint_eq(sizeof(pcl_kblock_t) % 16, 0);
  ck_assert_uint_eq(sizeof(pcl_kargs_t), 96);
}
END_TEST

START_TEST(test_kop_map) {
  ck_assert_int_eq(pcl_exec_kop_of(PCL_PLAN_OP_RECSPKT), PCL_KOP_RECSPKT);
  ck_assert_int_eq(pcl_exec_kop_of(PCL_PLAN_OP_PIPELINE), PCL_KOP_PIPELINE);
  ck_assert_int_eq(pcl_exec_kop_of(PCL_PLAN_OP_SEM_RELEASE), PCL_KOP_SEM_RELEASE);
  ck_assert_int_eq(pcl_exec_kop_of(PCL_PLAN_OP_GLRES), -1);
  ck_assert_int_eq(pcl_exec_kop_of(PCL_PLAN_OP_GSTORE), -1);
}
END_TEST

START_TEST(test_ll_allreduce) {
  pcl_plan_t *p = load("ar", plan_ar_ll);
  for (int rank = 0; rank < 2; rank++) {
    pcl_kblock_t *b = build(p, rank, 4096, 4096);
    uint32_t mine = (uint32_t)rank * 2048, other = (uint32_t)(1 - rank) * 2048;
    ck_assert_int_eq(b[0].nops, 3);
    ck_assert_int_eq(b[0].nrefs, 8);
    ck_assert_int_eq(b[0].nmem, 1);
    ck_assert_int_eq(b[0].nremote, 1);
    ck_assert_int_eq(b[0].remote[0].kind, PCL_KBUF_SCRATCH);
    const pcl_kop_t *o = b[0].ops;
    ck_assert_int_eq(o[0].type, PCL_KOP_PPKT);
    ck_assert_int_eq(o[0].chan_type, PCL_KCHAN_MEMORY);
    ck_assert_int_eq(o[0].nids, 0); /* no channel_ids: memory data ops use remote refs */
    ck_assert_int_eq(o[0].redop, PCL_KOP_REDOP_CALL);
    ck_assert_int_eq(o[1].type, PCL_KOP_RESPKT);
    ck_assert_int_eq(o[1].redop, ncclSum); /* the plan names it */
    ck_assert_int_eq(o[1].ref_first, 2);
    ck_assert_int_eq(o[1].nsrc, 2);
    ck_assert_int_eq(o[1].ndst, 2);
    ck_assert_int_eq(o[2].type, PCL_KOP_UPKT);
    const pcl_kref_t *r = b[0].refs;
    ref_is(&r[0], other, 2048, PCL_KBUF_INPUT);
    ref_is(&r[1], 0, 2048, PCL_KBUF_REMOTE);
    ck_assert_int_eq(r[1].slot, 0);
    ref_is(&r[2], mine, 2048, PCL_KBUF_INPUT);
    ref_is(&r[3], 0, 2048, PCL_KBUF_SCRATCH);
    ref_is(&r[4], mine, 2048, PCL_KBUF_INPUT);
    ref_is(&r[5], 2048, 2048, PCL_KBUF_REMOTE);
    ref_is(&r[6], 2048, 2048, PCL_KBUF_SCRATCH);
    ref_is(&r[7], other, 2048, PCL_KBUF_INPUT);
    pcl_free(b);
  }
  pcl_exec_shape_t s;
  ck_assert_int_eq(pcl_exec_shape(p, 0, 4096, 4096, &s), ncclSuccess);
  ck_assert_int_eq(s.has_pkt_reduce, 1);
  ck_assert_int_eq(s.has_reduce, 1);
  ck_assert_int_eq(s.has_port, 0);
  ck_assert_int_eq(s.remote_io, 0);
  ck_assert_uint_eq(s.pkt_or & 7, 0);
  ck_assert_uint_eq(s.scratch_half, 2 * 4096); /* 2 chunks of 2048, as packets */
  /* 4 KiB + 32: chunks of 2064 bytes, still 16-aligned. */
  ck_assert_int_eq(pcl_exec_shape(p, 1, 4128, 4128, &s), ncclSuccess);
  ck_assert_uint_eq(s.pkt_or & 15, 0);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static void check_copy_tbg(const char *json, uint32_t wrap) {
  pcl_plan_t *p = load("tbg", json);
  ck_assert_int_eq(p->max_blocks, 3);
  pcl_kblock_t *b = build(p, 1, 4832, 4832); /* chunks of 2416 bytes = 151 units of 16 */
  const uint32_t off[3] = {0, 1616, 3232}, len[3] = {1616, 1616, 1600};
  for (int t = 0; t < 3; t++) {
    const pcl_kblock_t *k = &b[t];
    ck_assert_int_eq(k->nops, 5);
    ck_assert_int_eq(k->ops[0].type, PCL_KOP_COPY);
    ref_is(&k->refs[0], off[t], len[t], PCL_KBUF_INPUT);
    ref_is(&k->refs[1], off[t], len[t], PCL_KBUF_OUTPUT);
    ck_assert_int_eq(k->ops[1].type, PCL_KOP_NOP);
    const pcl_kop_t *pp = &k->ops[2];
    ck_assert_int_eq(pp->type, PCL_KOP_PIPELINE);
    ck_assert_int_eq(pp->n_inner, 2);
    ck_assert_uint_eq(pp->n_iter, 3); /* ceil(2416 / 1024) */
    ck_assert_uint_eq(pp->unit, 1024);
    ck_assert_uint_eq(pp->scratch_wrap, wrap);
    ck_assert_int_eq(k->ops[3].type, PCL_KOP_COPY);
    ck_assert_int_eq(k->ops[4].type, PCL_KOP_COPY);
    const pcl_kref_t *r = &k->refs[k->ops[3].ref_first];
    ref_is(&r[0], 2416, 2416, PCL_KBUF_INPUT);
    ref_is(&r[1], 2416, 2416, PCL_KBUF_SCRATCH);
    r = &k->refs[k->ops[4].ref_first];
    ref_is(&r[0], 2416, 2416, PCL_KBUF_SCRATCH);
    ref_is(&r[1], 2416, 2416, PCL_KBUF_OUTPUT);
  }
  pcl_exec_shape_t s;
  ck_assert_int_eq(pcl_exec_shape(p, 1, 4832, 4832, &s), ncclSuccess);
  ck_assert_int_eq(s.has_reduce, 0);
  ck_assert_int_eq(s.has_pkt_reduce, 0);
  pcl_free(b);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}

START_TEST(test_tbg_pipeline) {
  check_copy_tbg(plan_copy_tbg, 0);
}
END_TEST

START_TEST(test_tbg_pipeline_reuse) {
  check_copy_tbg(plan_copy_tbg_reuse, 2416);
}
END_TEST

/* Port-channel plans: the shape says which need registered buffers (the proxy reads user buffers
 * by memory id), and a bind's port table reaches every block that names the channel. */
static pcl_plan_t *load_file(const char *rel) {
  char path[1024], err[512] = "";
  const char *src = getenv("PCL_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  snprintf(path, sizeof(path), "%s/%s", src, rel);
  pcl_plan_t *p = NULL;
  ck_assert_msg(pcl_plan_load(path, &p, err, sizeof(err)) == ncclSuccess, "%s: %s", rel, err);
  return p;
}

START_TEST(test_port_shapes_and_bind) {
  pcl_plan_t *put = load_file("test/data/plans/good/ag2_port.json");
  pcl_plan_t *pkt = load_file("test/data/plans/good/ag2_port_ll.json");
  pcl_exec_shape_t s;
  ck_assert_int_eq(pcl_exec_shape(put, 0, 4096, 8192, &s), ncclSuccess);
  ck_assert_int_eq(s.has_port, 1);
  ck_assert_int_eq(s.remote_io, 1); /* puts land in the peer's output */
  ck_assert_int_eq(s.port_io, 1);   /* ... from this rank's input */
  ck_assert_int_eq(pcl_exec_shape(pkt, 0, 4096, 8192, &s), ncclSuccess);
  ck_assert_int_eq(s.has_port, 1);
  ck_assert_int_eq(s.remote_io, 0); /* scratch to scratch: no registration needed */
  ck_assert_int_eq(s.port_io, 0);

  pcl_kportchan_t port[1];
  pcl_kremote_t rb[1];
  memset(port, 0, sizeof(port));
  memset(rb, 0, sizeof(rb));
  port[0].chan_id = 7;
  port[0].src_mem[PCL_KBUF_SCRATCH] = 0;
  port[0].src_mem[PCL_KBUF_INPUT] = 5;
  rb[0].mem_id = 6;
  pcl_exec_bind_t bind = {NULL, port, rb};
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(put, 1, 4096, 8192, &l), ncclSuccess);
  pcl_kblock_t *b = pcl_calloc((size_t)put->max_blocks, sizeof(*b), "test blocks");
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(pcl_exec_build_blocks(put, 1, &l, &bind, b), ncclSuccess);
  int seen = 0;
  for (int i = 0; i < put->max_blocks; i++)
    if (b[i].nport > 0) {
      ck_assert_uint_eq(b[i].port[0].chan_id, 7);
      ck_assert_uint_eq(b[i].port[0].src_mem[PCL_KBUF_INPUT], 5);
      ck_assert_int_gt(b[i].nremote, 0);
      ck_assert_uint_eq(b[i].remote[0].mem_id, 6); /* the peer's output, by its memory id */
      seen++;
    }
  ck_assert_int_gt(seen, 0);
  pcl_free(b);
  pcl_plan_destroy(put);
  pcl_plan_destroy(pkt);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_bad_args) {
  pcl_plan_t *p = load("ar", plan_ar_ll);
  pcl_plan_layout_t l;
  pcl_kblock_t b;
  ck_assert_int_eq(pcl_plan_layout(p, 0, 4096, 4096, &l), ncclSuccess);
  ck_assert_int_eq(pcl_exec_build_blocks(p, 2, &l, NULL, &b), ncclInvalidArgument);
  ck_assert_int_eq(pcl_exec_build_blocks(p, -1, &l, NULL, &b), ncclInvalidArgument);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_build");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_abi_sizes);
  tcase_add_test(tc, test_kop_map);
  tcase_add_test(tc, test_ll_allreduce);
  tcase_add_test(tc, test_tbg_pipeline);
  tcase_add_test(tc, test_tbg_pipeline_reuse);
  tcase_add_test(tc, test_port_shapes_and_bind);
  tcase_add_test(tc, test_bad_args);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
