/* SPDX-License-Identifier: MIT
 * CPU tests of the executor's program building: op translation, chunk -> byte offsets,
 * thread-block-group slices, pipeline flattening and iteration counts, remote-buffer slots, the
 * per-shape facts (packet/reduce alignment) that decide what a call may run, and the elementwise
 * programs (exec_fuse.c), run on the CPU for the shipped LL allreduce plans. */
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

/* The packets' 32-bit flag (pcl_kflag32): the call's flag until 2^32 - 1, never 0, and no value
 * twice within 2^32 - 1 consecutive calls, across the first wraps too. */
START_TEST(test_flag32_wrap) {
  const uint64_t m = 0xffffffffull;
  ck_assert_uint_eq(pcl_kflag32(1), 1);
  ck_assert_uint_eq(pcl_kflag32(12345), 12345);
  ck_assert_uint_eq(pcl_kflag32(m), m);
  ck_assert_uint_eq(pcl_kflag32(m + 1), 1);
  ck_assert_uint_eq(pcl_kflag32(m + 2), 2);
  for (uint64_t w = 1; w < 6; w++)
    for (uint64_t f = w * m - 8; f < w * m + 8; f++) {
      ck_assert_uint_ne(pcl_kflag32(f), 0);
      ck_assert_uint_ne(pcl_kflag32(f), pcl_kflag32(f + 1));
      ck_assert_uint_ne(pcl_kflag32(f), pcl_kflag32(f + 2)); /* the same scratch half */
      ck_assert_uint_eq(pcl_kflag32(f), pcl_kflag32(f + m));
    }
  ck_assert_uint_ne(pcl_kflag32(UINT64_MAX), 0);
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

/* ---- the elementwise programs (exec_fuse.c) ---- */

START_TEST(test_ew_two_rank) {
  pcl_kblock_t k;
  pcl_kew_t ew;
  char why[160];
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.nremote = 1;
  k.remote[0] = (pcl_kremote_t){0x100000, 0x800, PCL_KABI_NO_MEM, PCL_KBUF_SCRATCH, {0}};
  ck_assert_int_eq(pcl_exec_ew_build(&k, 1, 0x200000, 0x400, &ew, why, sizeof(why)), 2);
  ck_assert_uint_eq(ew.bytes, 1024);
  ck_assert_uint_eq(ew.s_kind, PCL_KBUF_INPUT);
  ck_assert_uint_eq(ew.o_kind, PCL_KBUF_OUTPUT);
  ck_assert_uint_eq(ew.nput, 1);
  ck_assert_uint_eq(ew.put[0][0], 0x100000);
  ck_assert_uint_eq(ew.put[0][1], 0x100800); /* the PEER's odd half */
  ck_assert_uint_eq(ew.nterm, 2);
  ck_assert_uint_eq(ew.self_mask, 1); /* S first, then the peer's packets */
  ck_assert_uint_eq(ew.term[1][0], 0x200000);
  ck_assert_uint_eq(ew.term[1][1], 0x200400);
  ck_assert_uint_eq(ew.redop, PCL_KOP_REDOP_CALL);
  k.refs[1].offset = 512; /* packet offsets double: packets are twice the payload */
  k.refs[3].offset = 2048;
  ck_assert_int_eq(pcl_exec_ew_build(&k, 1, 0x200000, 0x400, &ew, why, sizeof(why)), 2);
  ck_assert_uint_eq(ew.put[0][0], 0x100000 + 1024);
  ck_assert_uint_eq(ew.term[1][0], 0x200000 + 4096);
  /* an idle block (the rank has none there) only keeps the flag protocol */
  memset(&k, 0, sizeof(k));
  ck_assert_int_eq(pcl_exec_ew_build(&k, 1, 0, 0, &ew, why, sizeof(why)), 2);
  ck_assert_uint_eq(ew.bytes, 0);
  ck_assert_uint_eq(ew.nput + ew.nterm, 0);
}
END_TEST

/* What refuses, each with its reason: refs[] of ll1_block are ppkt S -> R, repkt S + P -> O. */
static void ew_refused(pcl_kblock_t *k, const char *reason) {
  pcl_kew_t ew;
  char why[160] = "";
  k->nremote = 1;
  k->remote[0] = (pcl_kremote_t){0x100000, 0, PCL_KABI_NO_MEM, PCL_KBUF_SCRATCH, {0}};
  ck_assert_int_eq(pcl_exec_ew_build(k, 1, 0x200000, 0, &ew, why, sizeof(why)), 0);
  ck_assert_msg(strstr(why, reason) != NULL, "why '%s' lacks '%s'", why, reason);
  ck_assert_msg(strncmp(why, "block 0: ", 9) == 0, "why '%s' names no block", why);
}

START_TEST(test_ew_refusals) {
  pcl_kblock_t k;
  ll1_block(&k, PCL_KBUF_OUTPUT, 64);
  ew_refused(&k, "partly overlapping"); /* may be the same memory in place */
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.refs[3].size = 512;
  ew_refused(&k, "different sizes");
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.refs[2].offset = 1024; /* the reduction reads another plain range than ppkt sent */
  k.refs[4].offset = 1024;
  ew_refused(&k, "two different plain ranges");
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.refs[4].kind = PCL_KBUF_SCRATCH; /* plain result into scratch */
  ew_refused(&k, "outside the user buffers");
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.ops[1].type = PCL_KOP_RESPKT; /* the reduction sent on as packets */
  ew_refused(&k, "EW kernels lack");
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.ops[0].chan_type = PCL_KCHAN_PORT;
  ew_refused(&k, "port channel");
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.remote[0].ptr = 0; /* set by ew_refused: the peer is on another host */
  k.nremote = 1;
  {
    pcl_kew_t ew;
    char why[160] = "";
    ck_assert_int_eq(pcl_exec_ew_build(&k, 1, 0x200000, 0, &ew, why, sizeof(why)), 0);
    ck_assert_ptr_nonnull(strstr(why, "not mapped scratch"));
  }
  /* the reduction into O, then upkt of other packets over it: the reduction's packets would
   * still have to be waited for, so this is not the EW form */
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.nops = 3;
  k.nrefs = 7;
  k.ops[2] = (pcl_kop_t){
      .type = PCL_KOP_UPKT, .chan_type = PCL_KCHAN_MEMORY, .nsrc = 1, .ndst = 1, .ref_first = 5};
  k.refs[5] = (pcl_kref_t){4096, 1024, PCL_KBUF_SCRATCH, 0, 0};
  k.refs[6] = (pcl_kref_t){0, 1024, PCL_KBUF_OUTPUT, 0, 0};
  ew_refused(&k, "never uses");
  /* reading the input after writing the output at the same offset depends on in == out */
  ll1_block(&k, PCL_KBUF_OUTPUT, 0);
  k.nops = 3;
  k.nrefs = 7;
  k.ops[2] = k.ops[0];
  k.ops[2].ref_first = 5;
  k.refs[5] = k.refs[0];
  k.refs[6] = (pcl_kref_t){8192, 1024, PCL_KBUF_REMOTE, 0, 0};
  ew_refused(&k, "after writing the other one");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The shipped LL allreduce plans on the CPU: every rank's EW program, run as the EW kernel
 * runs it (all puts first, then per element the terms in order) over host memory standing in for
 * the ranks' scratch, gives every rank x0 + x1 + ... in rank order, bit for bit, on both scratch
 * halves. Packets are LL16 (kernel_abi.h). */
static void ew_run(const pcl_kew_t *e, const float *in, float *out, uint32_t flag, int phase) {
  const int odd = flag & 1;
  const uint32_t n = e->bytes / 8;
  const char *s = e->s_kind == PCL_KBUF_INPUT    ? (const char *)in + e->s_off
                  : e->s_kind == PCL_KBUF_OUTPUT ? (const char *)out + e->s_off
                                                 : NULL;
  char *o = e->o_kind == PCL_KBUF_INPUT    ? (char *)in + e->o_off
            : e->o_kind == PCL_KBUF_OUTPUT ? (char *)out + e->o_off
                                           : NULL;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v[2];
    if (s != NULL)
      memcpy(v, s + 8 * i, 8);
    if (phase == 0) {
      for (int j = 0; j < e->nput; j++) {
        pcl_ll16_packet_t pk = {v[0], flag, v[1], flag};
        memcpy((char *)(uintptr_t)e->put[j][odd] + 16 * (uint64_t)i, &pk, 16);
      }
      continue;
    }
    if (e->nterm == 0)
      continue;
    float acc[2] = {0, 0};
    for (int j = 0; j < e->nterm; j++) {
      uint32_t x[2] = {v[0], v[1]};
      if (!(e->self_mask & (1u << j))) {
        pcl_ll16_packet_t pk;
        memcpy(&pk, (const char *)(uintptr_t)e->term[j][odd] + 16 * (uint64_t)i, 16);
        ck_assert_uint_eq(pk.flag1, flag); /* every packet was sent before it is read */
        ck_assert_uint_eq(pk.flag2, flag);
        x[0] = pk.data1;
        x[1] = pk.data2;
      }
      for (int h = 0; h < 2; h++) {
        float f;
        memcpy(&f, &x[h], 4);
        acc[h] = j == 0 ? f : acc[h] + f;
      }
    }
    memcpy(o + 8 * i, acc, 8);
  }
}

static pcl_plan_t *load_shipped(const char *rel) {
  const char *src = getenv("PCL_SOURCE_DIR");
  char path[1024], err[512] = "";
  if (rel[0] == '/') /* a plan made by the test's fixture */
    snprintf(path, sizeof(path), "%s", rel);
  else
    snprintf(path, sizeof(path), "%s/%s", src != NULL ? src : PCL_TEST_SOURCE_DIR, rel);
  pcl_plan_t *p = NULL;
  ck_assert_msg(pcl_plan_load(path, &p, err, sizeof(err)) == ncclSuccess, "%s: %s", path, err);
  return p;
}

/* Rank r's blocks of a shipped plan, its peers' scratch bound as on the GPU (host memory here);
 * memory channels zeroed (their semaphores are never touched on the CPU). */
static pcl_kblock_t *shipped_blocks(const pcl_plan_t *p, int r, char **scratch, uint64_t half,
                                    uint64_t in_bytes, uint64_t out_bytes) {
  const pcl_plan_gpu_t *g = &p->gpus[r];
  pcl_kmemchan_t mem[64];
  pcl_kremote_t rb[64];
  memset(mem, 0, sizeof(mem));
  memset(rb, 0, sizeof(rb));
  ck_assert_int_le(g->n_rbufs, 64);
  ck_assert_int_le(g->n_channels[PCL_PLAN_CHAN_MEMORY], 64);
  for (int i = 0; i < g->n_rbufs; i++) {
    ck_assert_int_eq(g->rbufs[i].type, PCL_PLAN_BUF_SCRATCH);
    rb[i].ptr = (uint64_t)(uintptr_t)scratch[g->rbufs[i].rank];
    rb[i].odd_half = half;
    rb[i].kind = PCL_KBUF_SCRATCH;
    rb[i].mem_id = PCL_KABI_NO_MEM;
  }
  pcl_exec_bind_t bind = {mem, NULL, rb};
  pcl_plan_layout_t l;
  ck_assert_int_eq(pcl_plan_layout(p, r, in_bytes, out_bytes, &l), ncclSuccess);
  pcl_kblock_t *b = pcl_calloc((size_t)p->max_blocks, sizeof(*b), "test blocks");
  ck_assert_int_eq(pcl_exec_build_blocks(p, r, &l, &bind, b), ncclSuccess);
  return b;
}

static void ew_shipped(const char *rel, int nranks, int want) {
  pcl_plan_t *p = load_shipped(rel);
  ck_assert_int_eq(p->n_gpus, nranks);
  const uint32_t bytes = 4096, nf = bytes / 4;
  pcl_exec_shape_t sh;
  ck_assert_msg(pcl_exec_shape(p, 0, bytes, bytes, &sh) == ncclSuccess, "%s: no layout at %u bytes",
                rel, bytes);
  const uint64_t half = (sh.scratch_half + 255) & ~(uint64_t)255;
  char *scratch[8];
  float *in[8], *out[8];
  pcl_kew_t *ew[8];
  for (int r = 0; r < nranks; r++) {
    scratch[r] = pcl_calloc(2 * half, 1, "test scratch");
    in[r] = pcl_calloc(nf, 4, "test in");
    out[r] = p->inplace ? in[r] : pcl_calloc(nf, 4, "test out");
    ew[r] = pcl_calloc((size_t)p->max_blocks, sizeof(pcl_kew_t), "test ew");
  }
  for (int r = 0; r < nranks; r++) {
    pcl_kblock_t *b = shipped_blocks(p, r, scratch, half, bytes, bytes);
    char why[160] = "";
    int got = pcl_exec_ew_build(b, p->max_blocks, (uint64_t)(uintptr_t)scratch[r], half, ew[r], why,
                                sizeof(why));
    ck_assert_msg(got == want, "%s rank %d: EW bound %d, want %d (%s)", rel, r, got, want, why);
    pcl_free(b);
  }
  for (uint32_t flag = 1; flag <= 2; flag++) {
    for (int r = 0; r < nranks; r++)
      for (uint32_t i = 0; i < nf; i++) /* values whose float sums depend on the order */
        in[r][i] =
            (float)((i * 7919u + (uint32_t)r * 104729u + flag) % 1000u) * 0.37f + 1e-3f * (float)r;
    float *want_out = pcl_calloc(nf, 4, "test want");
    for (uint32_t i = 0; i < nf; i++) {
      float acc = in[0][i];
      for (int r = 1; r < nranks; r++)
        acc += in[r][i];
      want_out[i] = acc;
    }
    for (int phase = 0; phase < 2; phase++)
      for (int r = 0; r < nranks; r++)
        for (int b = 0; b < p->max_blocks; b++)
          ew_run(&ew[r][b], in[r], out[r], flag, phase);
    for (int r = 0; r < nranks; r++)
      ck_assert_msg(memcmp(out[r], want_out, bytes) == 0, "%s rank %d flag %u differs", rel, r,
                    flag);
    pcl_free(want_out);
  }
  for (int r = 0; r < nranks; r++) {
    pcl_free(scratch[r]);
    if (!p->inplace)
      pcl_free(out[r]);
    pcl_free(in[r]);
    pcl_free(ew[r]);
  }
  pcl_plan_destroy(p);
}

/* The shipped one-phase LL allreduce plans: ranks and the EW kernel they must take. */
static const struct {
  const char *path;
  int nranks, bound;
} ew_plans[] = {
    {"plans/allreduce/2gpu_ll1_inplace.json", 2, 2},
    {"plans/allreduce/2gpu_ll1_outofplace.json", 2, 2},
    {"plans/allreduce/2gpu_ll1_small_outofplace.json", 2, 2},
    {"plans/extra/allreduce/4gpu_ll1_inplace.json", 4, 4},
    {"plans/extra/allreduce/4gpu_ll1_outofplace.json", 4, 4},
    {"plans/extra/allreduce/8gpu_ll1_inplace.json", 8, 8},
    {"plans/extra/allreduce/8gpu_ll1_outofplace.json", 8, 8},
};

START_TEST(test_ew_shipped) {
  ew_shipped(ew_plans[_i].path, ew_plans[_i].nranks, ew_plans[_i].bound);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The EWX programs on the CPU, run as the EWX kernel runs them: pass 1 the puts and copies of
 * every element, pass 2 per element the terms, then the reduction or the stored terms. */
static char *ewx_loc(float *in, float *out, uint8_t out_mask, int j, uint32_t off) {
  return (char *)((out_mask >> j) & 1u ? out : in) + off;
}

static void ewx_run(const pcl_kewx_t *e, float *in, float *out, uint32_t flag, int phase) {
  const int odd = flag & 1;
  const uint32_t n = e->bytes / 8;
  const char *s = e->s_kind == PCL_KEW_NONE
                      ? NULL
                      : (const char *)(e->s_kind == PCL_KBUF_OUTPUT ? out : in) + e->s_off;
  char *o = e->o_kind == PCL_KEW_NONE
                ? NULL
                : (char *)(e->o_kind == PCL_KBUF_OUTPUT ? out : in) + e->o_off;
  for (uint32_t i = 0; i < n; i++) {
    if (phase == 0) {
      for (int j = 0; j < e->nput; j++) {
        uint32_t v[2];
        memcpy(v, ewx_loc(in, out, e->src_out, j, e->src[j]) + 8 * i, 8);
        pcl_ll16_packet_t pk = {v[0], flag, v[1], flag};
        memcpy((char *)(uintptr_t)e->put[j][odd] + 16 * (uint64_t)i, &pk, 16);
      }
      for (int k = 0; k < e->ncopy; k++)
        memcpy(ewx_loc(in, out, e->cdst_out, k, e->cdst[k]) + 8 * i,
               ewx_loc(in, out, e->csrc_out, k, e->csrc[k]) + 8 * i, 8);
      continue;
    }
    float x[PCL_KEW_MAX][2] = {{0}};
    for (int j = 0; j < e->nterm; j++) {
      if (e->self_mask & (1u << j)) {
        memcpy(x[j], s + 8 * i, 8);
        continue;
      }
      pcl_ll16_packet_t pk;
      memcpy(&pk, (const char *)(uintptr_t)e->term[j][odd] + 16 * (uint64_t)i, 16);
      ck_assert_uint_eq(pk.flag1, flag); /* every packet was sent before it is read */
      ck_assert_uint_eq(pk.flag2, flag);
      memcpy(&x[j][0], &pk.data1, 4);
      memcpy(&x[j][1], &pk.data2, 4);
    }
    if (o != NULL) {
      float acc[2] = {x[0][0], x[0][1]};
      for (int j = 1; j < e->nterm; j++)
        for (int h = 0; h < 2; h++)
          acc[h] += x[j][h];
      memcpy(o + 8 * i, acc, 8);
    } else {
      for (int j = 0; j < e->nterm; j++)
        if (e->tdst_mask & (1u << j))
          memcpy(ewx_loc(in, out, e->tdst_out, j, e->tdst[j]) + 8 * i, x[j], 8);
    }
  }
}

/* One rank's EWX program of a shipped plan, its scratch and peers' bound as on the GPU. */
static pcl_kewx_t *ewx_program(const char *rel, const pcl_plan_t *p, int r, char **scratch,
                               uint64_t half, uint64_t in_bytes, uint64_t out_bytes) {
  pcl_kblock_t *b = shipped_blocks(p, r, scratch, half, in_bytes, out_bytes);
  pcl_kewx_t *e = pcl_calloc((size_t)p->max_blocks, sizeof(*e), "test ewx");
  char why[160] = "";
  pcl_kew_t *ew = pcl_calloc((size_t)p->max_blocks, sizeof(*ew), "test ew");
  int got = pcl_exec_ew_build(b, p->max_blocks, (uint64_t)(uintptr_t)scratch[r], half, ew, NULL, 0);
  ck_assert_msg(got == 0, "%s rank %d takes the EW kernel, not EWX", rel, r);
  got = pcl_exec_ewx_build(b, p->max_blocks, (uint64_t)(uintptr_t)scratch[r], half, e, why,
                           sizeof(why));
  ck_assert_msg(got != 0, "%s rank %d: not EWX (%s)", rel, r, why);
  /* allgather and reduce-scatter send to and receive from every peer on every rank */
  if (p->collective == PCL_PLAN_COLL_ALLGATHER || p->collective == PCL_PLAN_COLL_REDUCESCATTER)
    ck_assert_int_eq(got, p->n_gpus);
  pcl_free(ew);
  pcl_free(b);
  return e;
}

/* Value of element i of rank q's input in round `flag`: small integers, so sums are exact in
 * any order. */
static float ewx_val(int q, uint32_t i, uint32_t flag) {
  return (float)((i * 7u + (uint32_t)q * 131u + flag) % 1000u);
}

/* The shipped LL allgather, reduce-scatter, broadcast and reduce plans (root 0) on the CPU:
 * every rank's EWX program gives the collective's result on both scratch halves, in place and
 * out of place. */
static void ewx_shipped(const char *rel, int nranks) {
  pcl_plan_t *p = load_shipped(rel);
  ck_assert_int_eq(p->n_gpus, nranks);
  const int ag = p->collective == PCL_PLAN_COLL_ALLGATHER;
  const int rs = p->collective == PCL_PLAN_COLL_REDUCESCATTER;
  const int red = p->collective == PCL_PLAN_COLL_REDUCE;
  const uint32_t total = 4096 * (uint32_t)nranks, chunk = total / (uint32_t)nranks;
  const uint32_t in_bytes = ag ? chunk : total, out_bytes = rs ? chunk : total;
  pcl_exec_shape_t sh;
  ck_assert_msg(pcl_exec_shape(p, 0, in_bytes, out_bytes, &sh) == ncclSuccess,
                "%s: no layout at %u bytes", rel, total);
  const uint64_t half = (sh.scratch_half + 255) & ~(uint64_t)255;
  char *scratch[8];
  float *big[8], *small[8], *in[8], *out[8];
  pcl_kewx_t *e[8];
  for (int r = 0; r < nranks; r++) {
    scratch[r] = pcl_calloc(2 * half, 1, "test scratch");
    big[r] = pcl_calloc(total / 4, 4, "test big");
    small[r] = p->inplace ? NULL : pcl_calloc((ag || rs ? chunk : total) / 4, 4, "test small");
    /* in place: allgather's input is its output's own chunk, reduce-scatter's output likewise,
     * and broadcast's and reduce's input is their output */
    float *mine = p->inplace ? big[r] + (ag || rs ? (size_t)r * chunk / 4 : 0) : small[r];
    in[r] = ag ? mine : big[r];
    out[r] = ag ? big[r] : mine;
  }
  for (int r = 0; r < nranks; r++)
    e[r] = ewx_program(rel, p, r, scratch, half, in_bytes, out_bytes);
  for (uint32_t flag = 1; flag <= 2; flag++) {
    for (int r = 0; r < nranks; r++)
      for (uint32_t i = 0; i < in_bytes / 4; i++)
        in[r][i] = ewx_val(r, i, flag);
    float *want = pcl_calloc(total / 4, 4, "test want");
    for (int q = 0; q < nranks; q++)
      for (uint32_t i = 0; i < in_bytes / 4; i++) {
        if (ag)
          want[(size_t)q * chunk / 4 + i] = ewx_val(q, i, flag);
        else if (rs || red)
          want[i] += ewx_val(q, i, flag);
        else if (q == 0) /* broadcast from rank 0 */
          want[i] = ewx_val(q, i, flag);
      }
    for (int phase = 0; phase < 2; phase++)
      for (int r = 0; r < nranks; r++)
        for (int b = 0; b < p->max_blocks; b++)
          ewx_run(&e[r][b], in[r], out[r], flag, phase);
    for (int r = 0; r < (red ? 1 : nranks); r++)
      ck_assert_msg(memcmp(out[r], want + (rs ? (size_t)r * chunk / 4 : 0), out_bytes) == 0,
                    "%s rank %d flag %u differs", rel, r, flag);
    pcl_free(want);
  }
  for (int r = 0; r < nranks; r++) {
    pcl_free(scratch[r]);
    pcl_free(big[r]);
    pcl_free(small[r]);
    pcl_free(e[r]);
  }
  pcl_plan_destroy(p);
}

/* A shipped plan and its rank count. */
typedef struct {
  const char *path;
  int nranks;
} plan_ranks_t;

static const plan_ranks_t ewx_plans[] = {
    {"plans/extra/allgather/2gpu_ll_outofplace.json", 2},
    {"plans/extra/allgather/4gpu_ll_inplace.json", 4},
    {"plans/extra/allgather/4gpu_ll_outofplace.json", 4},
    {"plans/extra/allgather/8gpu_ll_inplace.json", 8},
    {"plans/extra/allgather/8gpu_ll_outofplace.json", 8},
    {"plans/extra/reducescatter/2gpu_ll_inplace.json", 2},
    {"plans/extra/reducescatter/2gpu_ll_outofplace.json", 2},
    {"plans/extra/reducescatter/4gpu_ll_inplace.json", 4},
    {"plans/extra/reducescatter/4gpu_ll_outofplace.json", 4},
    {"plans/extra/reducescatter/8gpu_ll_inplace.json", 8},
    {"plans/extra/reducescatter/8gpu_ll_outofplace.json", 8},
    {"plans/extra/broadcast/2gpu_ll_inplace.json", 2},
    {"plans/extra/broadcast/2gpu_ll_outofplace.json", 2},
    {"plans/extra/broadcast/4gpu_ll_inplace.json", 4},
    {"plans/extra/broadcast/4gpu_ll_outofplace.json", 4},
    {"plans/extra/broadcast/8gpu_ll_inplace.json", 8},
    {"plans/extra/broadcast/8gpu_ll_outofplace.json", 8},
    {"plans/extra/reduce/2gpu_ll_inplace.json", 2},
    {"plans/extra/reduce/2gpu_ll_outofplace.json", 2},
    {"plans/extra/reduce/4gpu_ll_inplace.json", 4},
    {"plans/extra/reduce/4gpu_ll_outofplace.json", 4},
    {"plans/extra/reduce/8gpu_ll_inplace.json", 8},
    {"plans/extra/reduce/8gpu_ll_outofplace.json", 8},
};

START_TEST(test_ewx_shipped) {
  ewx_shipped(ewx_plans[_i].path, ewx_plans[_i].nranks);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* MSCCL++'s own plans ask 1024 threads per block, beyond the LL and EW kernels' bound: their
 * programs run on them at the bound (the kernels loop over elements by blockDim, so the thread
 * count is not part of what a plan computes) while every range fits one pass of 1024 threads
 * (8 KiB): at 1 KiB, not at 64 KiB or 1 MiB. Every rank's program is LL-eligible; rank 0 of the
 * transfer plans, which only sends its chunk and receives the other, proves elementwise (EW2);
 * their rank 1 forwards packets it received (rppkt), which the EW kernels do not take (they send
 * before they wait). */
static const struct {
  const char *path;
  int ew[2]; /* the EW bound rank r's program proves; 0: not elementwise */
} conf_plans[] = {
    {"test/data/plans/conformance/transfer_pack_2.json", {2, 0}},
    {"test/data/plans/conformance/transfer_pack_tbg_2.json", {2, 0}},
    {"test/data/plans/conformance/allreduce_packet_2.json", {0, 0}},
    {"test/data/plans/conformance/reduce_pack_2.json", {0, 0}},
    {"test/data/plans/conformance/reduce_pack_tbg_2.json", {0, 0}},
};

START_TEST(test_conformance_fast_path) {
  pcl_plan_t *p = load_shipped(conf_plans[_i].path);
  ck_assert_int_eq(p->n_gpus, 2);
  ck_assert_int_eq(p->num_threads_per_block, 1024);
  ck_assert_int_eq(pcl_exec_launch_threads(p, 1), PCL_KABI_LL_MAX_THREADS);
  ck_assert_int_eq(pcl_exec_launch_threads(p, 0), 1024);
  static const uint32_t sizes[] = {1024, 65536, 1u << 20};
  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
    const uint32_t total = sizes[si];
    const int ag = p->collective == PCL_PLAN_COLL_ALLGATHER;
    const uint32_t in_bytes = ag ? total / (uint32_t)p->n_gpus : total;
    pcl_exec_shape_t sh;
    ck_assert_int_eq(pcl_exec_shape(p, 0, in_bytes, total, &sh), ncclSuccess);
    const uint64_t half = (sh.scratch_half + 255) & ~(uint64_t)255;
    char *scratch[2];
    for (int r = 0; r < 2; r++)
      scratch[r] = pcl_calloc(2 * half, 1, "test scratch");
    for (int r = 0; r < 2; r++) {
      pcl_kblock_t *b = shipped_blocks(p, r, scratch, half, in_bytes, total);
      pcl_kew_t *ew = pcl_calloc((size_t)p->max_blocks, sizeof(*ew), "test ew");
      char why[160] = "";
      ck_assert_msg(pcl_exec_ll_eligible(b, p->max_blocks), "%s rank %d: not LL",
                    conf_plans[_i].path, r);
      ck_assert_msg(pcl_exec_fast_threads_ok(p, b, p->max_blocks) == (total <= 1024),
                    "%s rank %d, %u bytes: fast kernels %s", conf_plans[_i].path, r, total,
                    total <= 1024 ? "refused" : "allowed");
      /* Past one pass of the narrow kernels the LL kernel's wide form runs the copy-only
       * allgathers at every size and the reducing plans at 64 KiB; the interpreter runs the
       * latter at 1 MiB (measured faster there). */
      const int wide = total > 1024 && (ag || total <= 65536);
      ck_assert_msg(pcl_exec_ll_wide(p, &sh, b, p->max_blocks) == wide,
                    "%s rank %d, %u bytes: wide LL kernel %s", conf_plans[_i].path, r, total,
                    wide ? "refused" : "taken");
      const int got = pcl_exec_ew_build(b, p->max_blocks, (uint64_t)(uintptr_t)scratch[r], half, ew,
                                        why, sizeof(why));
      ck_assert_msg(got == conf_plans[_i].ew[r], "%s rank %d, %u bytes: EW bound %d, want %d (%s)",
                    conf_plans[_i].path, r, total, got, conf_plans[_i].ew[r], why);
      pcl_free(ew);
      pcl_free(b);
    }
    for (int r = 0; r < 2; r++)
      pcl_free(scratch[r]);
  }
  /* The shipped plans keep their own thread count, and any size. */
  pcl_plan_t *q = load_shipped("plans/extra/allgather/4gpu_ll_inplace.json");
  ck_assert_int_eq(pcl_exec_launch_threads(q, 1), q->num_threads_per_block);
  ck_assert_int_eq(pcl_exec_fast_threads_ok(q, NULL, 0), 1);
  pcl_exec_shape_t qs;
  ck_assert_int_eq(pcl_exec_shape(q, 0, 1024, 4096, &qs), ncclSuccess);
  ck_assert_int_eq(pcl_exec_ll_wide(q, &qs, NULL, 0), 0);
  pcl_plan_destroy(q);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Every rank's program of a plan of plain ops takes the Simple kernel (not the LL kernel, nor
 * the interpreter) at the smallest size of its range that splits, and at 1 MiB (or its largest):
 * whatever made the plan (the DSL's variants, MSCCL++'s plans). */
static void simple_takes(const char *rel, int nranks) {
  pcl_plan_t *p = load_shipped(rel);
  ck_assert_int_eq(p->n_gpus, nranks);
  uint64_t sizes[2] = {p->min_message_size, 1u << 20};
  if (sizes[1] > p->max_message_size)
    sizes[1] = p->max_message_size;
  int built = 0;
  for (int si = 0; si < 2; si++) {
    uint64_t in = 0, out = 0, msg = sizes[si];
    pcl_plan_layout_t l;
    /* A size may not split into the plan's chunks: round up to one that does. */
    while (msg <= p->max_message_size && (pcl_plan_buffer_bytes(p, msg, &in, &out) != 0 ||
                                          pcl_plan_layout(p, 0, in, out, &l) != ncclSuccess))
      msg += 16;
    if (msg > p->max_message_size)
      continue;
    for (int r = 0; r < nranks; r++) {
      pcl_kblock_t *b = build(p, r, in, out);
      ck_assert_msg(pcl_exec_simple_eligible(b, p->max_blocks) == 1,
                    "%s rank %d, %llu bytes: misses the Simple kernel", rel, r,
                    (unsigned long long)msg);
      ck_assert_msg(pcl_exec_ll_eligible(b, p->max_blocks) == 0, "%s rank %d: LL?", rel, r);
      pcl_free(b);
    }
    built++;
  }
  ck_assert_msg(built > 0, "%s: no size of its range splits", rel);
  pcl_plan_destroy(p);
}

static const plan_ranks_t simple_plans[] = {
    {"test/data/plans/conformance/allreduce_simple_2.json", 2},
    {"test/data/plans/conformance/reduce_2.json", 2},
    {"test/data/plans/conformance/reduce_tbg_2.json", 2},
#define SIMPLE_SHIPPED(n)                                                                          \
  {"plans/extra/allreduce/" #n "gpu_simple_inplace.json", n},                                      \
      {"plans/extra/allreduce/" #n "gpu_simple_outofplace.json", n},                               \
      {"plans/extra/allreduce/" #n "gpu_simple_pipe_inplace.json", n},                             \
      {"plans/extra/allreduce/" #n "gpu_simple_pipe_outofplace.json", n},                          \
      {"plans/extra/allreduce/" #n "gpu_zerocopy_inplace.json", n},                                \
      {"plans/extra/allreduce/" #n "gpu_zerocopy_outofplace.json", n},                             \
      {"plans/extra/allgather/" #n "gpu_simple_inplace.json", n},                                  \
      {"plans/extra/allgather/" #n "gpu_simple_outofplace.json", n},                               \
      {"plans/extra/reducescatter/" #n "gpu_simple_inplace.json", n},                              \
      {"plans/extra/reducescatter/" #n "gpu_simple_outofplace.json", n},                           \
      {"plans/extra/broadcast/" #n "gpu_simple_inplace.json", n},                                  \
      {"plans/extra/broadcast/" #n "gpu_simple_outofplace.json", n},                               \
      {"plans/extra/reduce/" #n "gpu_simple_inplace.json", n}, {                                   \
    "plans/extra/reduce/" #n "gpu_simple_outofplace.json", n                                       \
  }
    SIMPLE_SHIPPED(2),
    SIMPLE_SHIPPED(4),
    SIMPLE_SHIPPED(8),
#undef SIMPLE_SHIPPED
};

START_TEST(test_simple_shipped) {
  simple_takes(simple_plans[_i].path, simple_plans[_i].nranks);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* What keeps a program off the Simple kernel: a port channel, a packet op. */
START_TEST(test_simple_refusals) {
  pcl_plan_t *p = load_shipped("plans/extra/allreduce/2gpu_simple_inplace.json");
  pcl_kblock_t *b = build(p, 0, 1u << 20, 1u << 20);
  ck_assert_int_eq(pcl_exec_simple_eligible(b, p->max_blocks), 1);
  int put = -1;
  for (int i = 0; i < b[0].nops && put < 0; i++)
    if (b[0].ops[i].type == PCL_KOP_PUT)
      put = i;
  ck_assert_int_ge(put, 0);
  b[0].ops[put].chan_type = PCL_KCHAN_PORT;
  ck_assert_int_eq(pcl_exec_simple_eligible(b, p->max_blocks), 0);
  b[0].ops[put].chan_type = PCL_KCHAN_MEMORY;
  b[0].ops[put].type = PCL_KOP_PPKT;
  ck_assert_int_eq(pcl_exec_simple_eligible(b, p->max_blocks), 0);
  b[0].ops[put].type = PCL_KOP_PUT;
  ck_assert_int_eq(pcl_exec_simple_eligible(b, p->max_blocks), 1);
  pcl_free(b);
  pcl_plan_destroy(p);
  /* The LL plans are the LL kernel's, never the Simple kernel's. */
  p = load_shipped("plans/allreduce/2gpu_ll1_inplace.json");
  b = build(p, 0, 4096, 4096);
  ck_assert_int_eq(pcl_exec_simple_eligible(b, p->max_blocks), 0);
  pcl_free(b);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Any root by relabelling: the shift is the root for broadcast and reduce, 0 for the rest, -1
 * for a root outside the communicator or one that would move ranks across nodes; rank p runs
 * plan rank (p - root) mod n, and plan rank q is rank (q + root) mod n. */
START_TEST(test_root_shift) {
  pcl_plan_t *b = load_shipped("plans/extra/broadcast/4gpu_ll_inplace.json");
  pcl_plan_t *a = load_shipped("plans/allreduce/2gpu_ll1_inplace.json");
  for (int root = 0; root < 4; root++)
    ck_assert_int_eq(pcl_plan_root_shift(b, root), root);
  ck_assert_int_eq(pcl_plan_root_shift(b, 4), -1);
  ck_assert_int_eq(pcl_plan_root_shift(b, -1), -1);
  ck_assert_int_eq(pcl_plan_root_shift(a, 7), 0); /* the root means nothing to allreduce */
  for (int p = 0; p < 4; p++)
    for (int s = 0; s < 4; s++) {
      int v = pcl_exec_vrank(p, s, 4);
      ck_assert_int_eq(v, (p + 4 - s) % 4);
      ck_assert_int_eq(pcl_exec_prank(v, s, 4), p);
    }
  ck_assert_int_eq(pcl_exec_vrank(1, 1, 4), 0); /* the root runs plan rank 0 */
  b->nranks_per_node = 2;                       /* as if 2 nodes of 2: whole nodes only */
  ck_assert_int_eq(pcl_plan_root_shift(b, 2), 2);
  ck_assert_int_eq(pcl_plan_root_shift(b, 1), -1);
  ck_assert_int_eq(pcl_plan_root_shift(b, 3), -1);
  pcl_plan_destroy(b);
  pcl_plan_destroy(a);
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

/* An allgather that proves elementwise (EW, bound n) on every rank, at 4 KiB per rank. */
static void ew_allgather_proves(const char *rel, int nranks) {
  pcl_plan_t *p = load_shipped(rel);
  const uint32_t chunk = 4096, total = chunk * (uint32_t)nranks;
  pcl_exec_shape_t sh;
  ck_assert_msg(pcl_exec_shape(p, 0, chunk, total, &sh) == ncclSuccess, "%s: no layout", rel);
  const uint64_t half = (sh.scratch_half + 255) & ~(uint64_t)255;
  char *scratch[8];
  for (int r = 0; r < nranks; r++)
    scratch[r] = pcl_calloc(2 * half, 1, "test scratch");
  pcl_kew_t *ew = pcl_calloc((size_t)p->max_blocks, sizeof(*ew), "test ew");
  for (int r = 0; r < nranks; r++) {
    pcl_kblock_t *b = shipped_blocks(p, r, scratch, half, chunk, total);
    char why[160] = "";
    int got = pcl_exec_ew_build(b, p->max_blocks, (uint64_t)(uintptr_t)scratch[r], half, ew, why,
                                sizeof(why));
    ck_assert_msg(got == nranks, "%s rank %d: EW bound %d, want %d (%s)", rel, r, got, nranks, why);
    pcl_free(b);
  }
  pcl_free(ew);
  for (int r = 0; r < nranks; r++)
    pcl_free(scratch[r]);
  pcl_plan_destroy(p);
}

/* Variants of the shipped LL algorithms made with the DSL (gen_variants.py, run by ctest as a
 * fixture; PCL_VARIANTS names its manifest): other rank, block and thread counts, placements and
 * reduction orders. Each must take the kernel the manifest names and compute its collective, so
 * the fast path follows what a plan does rather than which file it is. */
START_TEST(test_variants) {
  const char *manifest = getenv("PCL_VARIANTS");
  FILE *f = fopen(manifest, "r");
  ck_assert_msg(f != NULL, "cannot read %s", manifest);
  char kind[8], path[1024];
  int n, count = 0;
  while (fscanf(f, "%7s %d %1023s", kind, &n, path) == 3) {
    if (strcmp(kind, "ew") == 0)
      ew_shipped(path, n, n);
    else if (strcmp(kind, "ew-ag") == 0)
      ew_allgather_proves(path, n);
    else if (strcmp(kind, "simple") == 0)
      simple_takes(path, n);
    else
      ewx_shipped(path, n);
    count++;
  }
  fclose(f);
  ck_assert_int_ge(count, 200);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("exec_build");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_abi_sizes);
  tcase_add_test(tc, test_flag32_wrap);
  tcase_add_test(tc, test_kop_map);
  tcase_add_test(tc, test_ll_allreduce);
  tcase_add_test(tc, test_tbg_pipeline);
  tcase_add_test(tc, test_tbg_pipeline_reuse);
  tcase_add_test(tc, test_port_shapes_and_bind);
  tcase_add_test(tc, test_pack);
  tcase_add_test(tc, test_ll_fast_path);
  tcase_add_test(tc, test_ew_two_rank);
  tcase_add_test(tc, test_ew_refusals);
  tcase_add_loop_test(tc, test_ew_shipped, 0, (int)(sizeof(ew_plans) / sizeof(ew_plans[0])));
  tcase_add_loop_test(tc, test_ewx_shipped, 0, (int)(sizeof(ewx_plans) / sizeof(ewx_plans[0])));
  tcase_add_loop_test(tc, test_conformance_fast_path, 0,
                      (int)(sizeof(conf_plans) / sizeof(conf_plans[0])));
  tcase_add_loop_test(tc, test_simple_shipped, 0,
                      (int)(sizeof(simple_plans) / sizeof(simple_plans[0])));
  tcase_add_test(tc, test_simple_refusals);
  tcase_add_test(tc, test_root_shift);
  tcase_add_test(tc, test_bad_args);
  suite_add_tcase(s, tc);
  if (getenv("PCL_VARIANTS") != NULL) { /* the test_exec_variants run (CMakeLists.txt) */
    TCase *v = tcase_create("variants");
    tcase_set_timeout(v, 120);
    tcase_add_test(v, test_variants);
    suite_add_tcase(s, v);
  }
  return pcl_test_run_suite(s);
}
