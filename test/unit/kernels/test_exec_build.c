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
  ck_assert_uint_eq(sizeof(pcl_kargs_t), 112);
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

/* The packed image holds every table at the offsets the kernel computes from the header, each
 * block at its stride, and nothing beyond a block's tables but zeros. */
START_TEST(test_pack) {
  pcl_plan_t *p = load("ar", plan_ar_ll);
  pcl_kblock_t *b = build(p, 1, 4096, 4096);
  b[0].nmem = 1;
  b[0].mem[0].remote_inbound = 0x1122334455667788ull;
  b[0].nremote = 1;
  b[0].remote[0].ptr = 0xabcdefull;
  uint32_t stride = pcl_exec_pack_stride(b, p->max_blocks);
  ck_assert_uint_eq(stride % 16, 0);
  ck_assert_uint_le(stride, sizeof(pcl_kblock_t));
  uint8_t *img = pcl_calloc((size_t)stride * (size_t)p->max_blocks, 1, "test image");
  ck_assert_ptr_nonnull(img);
  pcl_exec_pack_blocks(b, p->max_blocks, stride, img);
  for (int k = 0; k < p->max_blocks; k++) {
    const uint8_t *blk = img + (size_t)k * stride;
    const pcl_kblock_t *hdr = (const pcl_kblock_t *)blk;
    uint32_t off[5], bytes;
    pcl_kpack_offsets(hdr, off, &bytes);
    ck_assert_uint_le(bytes, stride);
    ck_assert_int_eq(hdr->nops, b[k].nops);
    ck_assert_int_eq(hdr->nrefs, b[k].nrefs);
    ck_assert_int_eq(memcmp(blk + off[0], b[k].mem, b[k].nmem * sizeof(pcl_kmemchan_t)), 0);
    ck_assert_int_eq(memcmp(blk + off[2], b[k].remote, b[k].nremote * sizeof(pcl_kremote_t)), 0);
    ck_assert_int_eq(memcmp(blk + off[3], b[k].ops, b[k].nops * sizeof(pcl_kop_t)), 0);
    ck_assert_int_eq(memcmp(blk + off[4], b[k].refs, b[k].nrefs * sizeof(pcl_kref_t)), 0);
    for (uint32_t i = bytes; i < stride; i++)
      ck_assert_uint_eq(blk[i], 0);
    for (int t = 0; t < 4; t++)
      ck_assert_uint_eq(off[t] % 16, 0);
  }
  const pcl_kmemchan_t *m = (const pcl_kmemchan_t *)(img + 16);
  ck_assert_uint_eq(m->remote_inbound, 0x1122334455667788ull);
  pcl_free(img);
  pcl_free(b);
  pcl_plan_destroy(p);
}
END_TEST

/* Which programs may run on the LL fast-path kernel, and which blocks it runs as one fused pass. */
static void ll1_block(pcl_kblock_t *k, int out_kind, uint32_t out_off) {
  memset(k, 0, sizeof(*k));
  k->nops = 2;
  k->nrefs = 5;
  k->ops[0] = (pcl_kop_t){
      .type = PCL_KOP_PPKT, .chan_type = PCL_KCHAN_MEMORY, .nsrc = 1, .ndst = 1, .ref_first = 0};
  k->ops[1] = (pcl_kop_t){.type = PCL_KOP_REPKT,
                          .chan_type = PCL_KCHAN_MEMORY,
                          .nsrc = 2,
                          .ndst = 1,
                          .ref_first = 2,
                          .redop = PCL_KOP_REDOP_CALL};
  k->refs[0] = (pcl_kref_t){0, 1024, PCL_KBUF_INPUT, 0, 0};
  k->refs[1] = (pcl_kref_t){0, 1024, PCL_KBUF_REMOTE, 0, 0};
  k->refs[2] = k->refs[0];
  k->refs[3] = (pcl_kref_t){0, 1024, PCL_KBUF_SCRATCH, 0, 0};
  k->refs[4] = (pcl_kref_t){out_off, 1024, (uint8_t)out_kind, 0, 0};
}

START_TEST(test_ll_fast_path) {
  pcl_plan_t *p = load("ar", plan_ar_ll);
  pcl_kblock_t *b = build(p, 0, 4096, 4096);
  ck_assert_int_eq(pcl_exec_ll_eligible(b, p->max_blocks), 1); /* ppkt, respkt, upkt */
  ck_assert_int_eq(pcl_exec_mark_fused(b, p->max_blocks), 0);  /* three ops: not the pattern */
  b[0].ops[1].chan_type = PCL_KCHAN_PORT;
  ck_assert_int_eq(pcl_exec_ll_eligible(b, p->max_blocks), 0);
  pcl_free(b);
  pcl_plan_destroy(p);
  p = load("copy", plan_copy_tbg);
  b = build(p, 0, 4096, 4096);
  ck_assert_int_eq(pcl_exec_ll_eligible(b, p->max_blocks), 0); /* plain copies */
  pcl_free(b);
  pcl_plan_destroy(p);

  pcl_kblock_t k[2];
  ll1_block(&k[0], PCL_KBUF_INPUT, 0);   /* in place */
  ll1_block(&k[1], PCL_KBUF_OUTPUT, 64); /* out of place: another buffer, any offset */
  ck_assert_int_eq(pcl_exec_ll_eligible(k, 2), 1);
  ck_assert_int_eq(pcl_exec_mark_fused(k, 2), 2);
  ck_assert_uint_eq(k[0].flags & PCL_KBLOCK_FUSED_PPKT_REPKT, PCL_KBLOCK_FUSED_PPKT_REPKT);
  ll1_block(&k[0], PCL_KBUF_INPUT, 16); /* overwrites S at another offset: order would matter */
  ck_assert_int_eq(pcl_exec_mark_fused(k, 1), 0);
  ck_assert_uint_eq(k[0].flags, 0);
  ll1_block(&k[0], PCL_KBUF_OUTPUT, 0);
  k[0].refs[2].offset = 1024; /* repkt reduces another range than ppkt sent */
  ck_assert_int_eq(pcl_exec_mark_fused(k, 1), 0);
  ll1_block(&k[0], PCL_KBUF_OUTPUT, 0);
  k[0].refs[3].size = 512; /* sizes differ */
  ck_assert_int_eq(pcl_exec_mark_fused(k, 1), 0);
  ll1_block(&k[0], PCL_KBUF_OUTPUT, 0);
  k[0].ops[0].nsrc = 2; /* ppkt pairs several sources */
  ck_assert_int_eq(pcl_exec_mark_fused(k, 1), 0);
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
  tcase_add_test(tc, test_pack);
  tcase_add_test(tc, test_ll_fast_path);
  tcase_add_test(tc, test_bad_args);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
