/* SPDX-License-Identifier: MIT
 * Plan loader and validator: every good plan loads into the expected structs, every bad plan is
 * refused with its expected "file: json.path: reason", the MSCCL++ conformance plans behave
 * (NVLS refused, the rest valid), and v0.7 names map onto current ops. */
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#include "pcl_test.h"
#include "plan.h"
#include "plan_test_util.h"

static pcl_plan_t *load_ok(const char *rel) {
  char path[1024], err[1024];
  pcl_plan_t *p = NULL;
  ncclResult_t r = pcl_plan_load(plan_path(path, sizeof(path), rel), &p, err, sizeof(err));
  ck_assert_msg(r == ncclSuccess, "%s: %s", rel, err);
  return p;
}

static int is_json(const char *n) {
  size_t l = strlen(n);
  return l > 5 && strcmp(n + l - 5, ".json") == 0;
}

START_TEST(test_good_plans_load) {
  char dir[1024];
  DIR *d = opendir(plan_path(dir, sizeof(dir), "good"));
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_json(e->d_name))
      continue;
    char rel[512];
    snprintf(rel, sizeof(rel), "good/%s", e->d_name);
    pcl_plan_t *p = load_ok(rel);
    ck_assert(p->name[0] != '\0');
    ck_assert_int_ge(p->n_gpus, 2);
    ck_assert(pcl_plan_size_runnable(p, 1024));
    pcl_plan_destroy(p);
    n++;
  }
  closedir(d);
  ck_assert_int_ge(n, 11);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_bad_plans_refused) {
  char path[1024];
  char *list = read_text(plan_path(path, sizeof(path), "bad/expected_errors.txt"), NULL);
  ck_assert_ptr_nonnull(list);
  int n = 0;
  for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#' || line[0] == '\0')
      continue;
    char *tab = strchr(line, '\t');
    ck_assert_ptr_nonnull(tab);
    *tab = '\0';
    const char *file = line, *want = tab + 1;
    char rel[512], err[1024];
    snprintf(rel, sizeof(rel), "bad/%s", file);
    pcl_plan_t *p = (pcl_plan_t *)(uintptr_t)1;
    ncclResult_t r = pcl_plan_load(plan_path(path, sizeof(path), rel), &p, err, sizeof(err));
    ck_assert_msg(r == ncclInvalidArgument, "%s: expected refusal, got %d (%s)", file, r, err);
    ck_assert_ptr_null(p);
    /* "file: json.path: reason": the file name starts the message. */
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
                  "%s: message does not start with the file: %s", file, err);
    ck_assert_msg(strstr(err, want) != NULL, "%s:\n  want: %s\n  got:  %s", file, want, err);
    n++;
  }
  free(list);
  ck_assert_int_ge(n, 40);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static const char *const nvls_plans[] = {"allreduce_pipeline_nvls_4.json", "reduce_nvls_2.json",
                                         "reduce_nvls_pipeline_2.json"};

static int is_nvls(const char *n) {
  for (size_t i = 0; i < sizeof(nvls_plans) / sizeof(nvls_plans[0]); i++)
    if (strcmp(n, nvls_plans[i]) == 0)
      return 1;
  return 0;
}

/* Loads every plan of a conformance directory; returns how many were seen. */
static int check_conformance_dir(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0, nvls = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_json(e->d_name))
      continue;
    char path[1024], err[1024];
    pcl_plan_t *p = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    ncclResult_t r = pcl_plan_load(path, &p, err, sizeof(err));
    if (is_nvls(e->d_name)) {
      ck_assert_msg(r == ncclInvalidArgument, "%s should be refused", path);
      ck_assert_msg(strstr(err, "NVLink multicast is disabled in planccl") != NULL, "%s", err);
      ck_assert_msg(strstr(err, "NVLS op 'glres' refused") != NULL, "%s", err);
      nvls++;
    } else {
      ck_assert_msg(r == ncclSuccess, "%s", err);
      ck_assert(pcl_plan_size_runnable(p, 1 << 20));
      pcl_plan_destroy(p);
    }
    n++;
  }
  closedir(d);
  ck_assert_int_eq(nvls, 3);
  return n;
}

START_TEST(test_conformance_in_repo) {
  char dir[1024];
  ck_assert_int_eq(check_conformance_dir(plan_path(dir, sizeof(dir), "conformance")), 11);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_conformance_shared) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/../shared/conformance/mscclpp", test_src_dir());
  if (access(dir, R_OK) != 0) {
    fprintf(stderr, "test_conformance_shared: %s absent, skipped (the in-repo copy is tested)\n",
            dir);
    return;
  }
  ck_assert_int_ge(check_conformance_dir(dir), 11);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_io_error) {
  char err[256];
  pcl_plan_t *p = NULL;
  ck_assert_int_eq(pcl_plan_load("/nonexistent/plan.json", &p, err, sizeof(err)), ncclSystemError);
  ck_assert_ptr_null(p);
  ck_assert_ptr_nonnull(strstr(err, "/nonexistent/plan.json: cannot open"));
  /* err may be NULL. */
  ck_assert_int_eq(pcl_plan_load("/nonexistent/plan.json", &p, NULL, 0), ncclSystemError);
  ck_assert_int_eq(pcl_plan_load_buffer("x", "{", 1, &p, NULL, 0), ncclInvalidArgument);
  pcl_plan_destroy(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* What is not a plan's text is refused with where it went wrong (line, column). */
static void text_refused(const char *text, size_t len, const char *want) {
  char err[512] = "";
  pcl_plan_t *p = NULL;
  ck_assert_int_eq(pcl_plan_load_buffer("t.json", text, len, &p, err, sizeof(err)),
                   ncclInvalidArgument);
  ck_assert_ptr_null(p);
  ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
  ck_assert_msg(strncmp(err, "t.json", 6) == 0, "error '%s' names no file", err);
}

START_TEST(test_text_errors) {
  static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
  text_refused(png, sizeof(png) - 1, "not JSON: byte 0x89 at line 1, column 1");
  text_refused("  <plan/>", 9, "not JSON: starts with '<' at line 1, column 3");
  text_refused(" \n\t", 3, "empty file");
  text_refused("{\"a\":\x01}", 6, "control byte 0x01 at line 1, column 6");
  text_refused("{\"a\":\"x\0y\"}", 11, "control byte 0x00 at line 1, column 8 (inside a string)");
  static const char bad[] = "{\n  \"name\": \"x\",\n  oops\n}";
  text_refused(bad, sizeof(bad) - 1, "invalid JSON at line 3, column 3");
  text_refused("{\"a\": [1,", 9, "invalid JSON at line 1");
  char deep[200];
  int n = 0;
  for (int i = 0; i < 70; i++)
    n += snprintf(deep + n, sizeof(deep) - (size_t)n, "%s", i == 0 ? "{" : "[");
  text_refused(deep, (size_t)n, "nested deeper than 64 levels at line 1, column 65");
  /* a directory opens but is no plan file */
  char err[512] = "";
  pcl_plan_t *p = NULL;
  ck_assert_int_eq(pcl_plan_load("/tmp", &p, err, sizeof(err)), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(err, "/tmp: a directory, not a plan file"));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_structs_ar2_ll) {
  pcl_plan_t *p = load_ok("good/ar2_ll.json");
  ck_assert_str_eq(p->name, "test_ar2_ll");
  ck_assert_int_eq(p->collective, PCL_PLAN_COLL_ALLREDUCE);
  ck_assert_int_eq(p->protocol, PCL_PLAN_PROTO_LL);
  ck_assert_int_eq(p->inplace, 1);
  ck_assert_int_eq(p->outofplace_ok, 0);
  ck_assert_int_eq(p->use_double_scratch_buffer, 1);
  ck_assert_int_eq(p->num_threads_per_block, 512);
  ck_assert_uint_eq(p->buffer_alignment, 16);
  ck_assert_uint_eq(p->max_message_size, 1 << 20);
  ck_assert_int_eq(p->nranks_per_node, 2);
  ck_assert_int_eq(p->priority, 0);
  ck_assert_int_eq(p->n_gpus, 2);
  ck_assert_int_eq(p->max_blocks, 1);
  ck_assert_uint_eq(p->max_scratch_chunks, 2);
  for (int r = 0; r < 2; r++) {
    const pcl_plan_gpu_t *g = &p->gpus[r];
    ck_assert_int_eq(g->id, r);
    ck_assert_uint_eq(g->chunks[PCL_PLAN_BUF_INPUT], 2);
    ck_assert_uint_eq(g->chunks[PCL_PLAN_BUF_SCRATCH], 2);
    ck_assert_int_eq(g->n_channels[PCL_PLAN_CHAN_MEMORY], 1);
    ck_assert_int_eq(g->n_channels[PCL_PLAN_CHAN_PORT], 0);
    ck_assert_int_eq(g->channels[PCL_PLAN_CHAN_MEMORY][0].peer, 1 - r);
    ck_assert_int_eq(g->channels[PCL_PLAN_CHAN_MEMORY][0].peer_channel, 0);
    ck_assert_int_eq(g->n_rbufs, 1);
    ck_assert_int_eq(g->rbufs[0].rank, 1 - r);
    ck_assert_int_eq(g->rbufs[0].type, PCL_PLAN_BUF_SCRATCH);
    ck_assert_int_eq(g->rbufs[0].access, 1u << PCL_PLAN_CHAN_MEMORY);
    const pcl_plan_block_t *b = &g->blocks[0];
    ck_assert_int_eq(b->n_ops, 3);
    ck_assert_int_eq(b->n_channels[PCL_PLAN_CHAN_MEMORY], 1);
    ck_assert_int_eq(b->n_rbufs[PCL_PLAN_CHAN_MEMORY], 1);
    const pcl_plan_op_t *ppkt = &b->ops[0], *rs = &b->ops[1], *up = &b->ops[2];
    ck_assert_int_eq(ppkt->type, PCL_PLAN_OP_PPKT);
    ck_assert_int_eq(ppkt->channel_type, PCL_PLAN_CHAN_MEMORY);
    ck_assert_int_eq(ppkt->reduce_op, PCL_PLAN_RED_NONE);
    ck_assert_int_eq(ppkt->n_src, 1);
    ck_assert_int_eq(ppkt->src[0].kind, PCL_PLAN_REF_LOCAL);
    ck_assert_int_eq(ppkt->src[0].type, PCL_PLAN_BUF_INPUT);
    ck_assert_int_eq(ppkt->src[0].rank, r);
    ck_assert_uint_eq(ppkt->src[0].index, (uint32_t)(1 - r));
    ck_assert_int_eq(ppkt->dst[0].kind, PCL_PLAN_REF_REMOTE);
    ck_assert_int_eq(ppkt->dst[0].rbuf, 0);
    ck_assert_int_eq(ppkt->dst[0].rank, 1 - r);
    ck_assert_int_eq(ppkt->dst[0].type, PCL_PLAN_BUF_SCRATCH);
    ck_assert_int_eq(ppkt->tbg_size, 1);
    ck_assert_int_eq(ppkt->barrier_id, -1);
    ck_assert_int_eq(rs->type, PCL_PLAN_OP_RESPKT);
    ck_assert_int_eq(rs->reduce_op, PCL_PLAN_RED_SUM);
    ck_assert_int_eq(rs->n_src, 2);
    ck_assert_int_eq(rs->n_dst, 2);
    ck_assert_int_eq(up->type, PCL_PLAN_OP_UPKT);
    ck_assert_int_eq(up->channel_type, PCL_PLAN_CHAN_NONE);
  }
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_pipeline_flattened) {
  pcl_plan_t *p = load_ok("good/ar2_pipeline_sem.json");
  const pcl_plan_gpu_t *g = &p->gpus[0];
  ck_assert_int_eq(g->n_sems, 1);
  ck_assert_uint_eq(g->sem_init[0], 0);
  ck_assert_int_eq(g->n_channels[PCL_PLAN_CHAN_MEMORY], 2);
  /* The k-th channel to a peer pairs with the peer's k-th channel back. */
  ck_assert_int_eq(g->channels[PCL_PLAN_CHAN_MEMORY][1].peer_channel, 1);
  const pcl_plan_block_t *b0 = &g->blocks[0], *b1 = &g->blocks[1];
  ck_assert_int_eq(b0->n_ops, 9);
  ck_assert_int_eq(b0->ops[2].type, PCL_PLAN_OP_PIPELINE);
  ck_assert_int_eq(b0->ops[2].n_inner, 6);
  ck_assert_uint_eq(b0->ops[2].unit_size, 4096);
  ck_assert_uint_eq(b0->ops[2].num_chunks, 1);
  ck_assert_int_eq(b0->ops[2].in_pipeline, 0);
  for (int k = 3; k < 9; k++)
    ck_assert_int_eq(b0->ops[k].in_pipeline, 1);
  ck_assert_int_eq(b0->ops[8].type, PCL_PLAN_OP_SEM_RELEASE);
  ck_assert_int_eq(b0->ops[8].n_sems, 1);
  ck_assert_int_eq(b1->channels[PCL_PLAN_CHAN_MEMORY][0], 1);
  ck_assert_int_eq(b1->ops[1].type, PCL_PLAN_OP_SEM_ACQUIRE);
  /* Block 1's remote slot 0 resolves to the gpu's remote buffer 1 (the peer's output). */
  const pcl_plan_op_t *put = &b1->ops[5];
  ck_assert_int_eq(put->type, PCL_PLAN_OP_PUT);
  ck_assert_int_eq(put->dst[0].slot, 0);
  ck_assert_int_eq(put->dst[0].rbuf, 1);
  ck_assert_int_eq(put->dst[0].type, PCL_PLAN_BUF_OUTPUT);
  ck_assert_int_eq(put->gpu_channels[0], 0); /* no channel_ids on this put */
  const pcl_plan_op_t *sig = &b1->ops[7];
  ck_assert_int_eq(sig->type, PCL_PLAN_OP_SIGNAL);
  ck_assert_int_eq(sig->channels[0], 0);
  ck_assert_int_eq(sig->gpu_channels[0], 1);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static pcl_plan_t *load_text_ok(const char *name, const char *text) {
  char err[1024];
  pcl_plan_t *p = NULL;
  ck_assert_msg(pcl_plan_load_buffer(name, text, strlen(text), &p, err, sizeof(err)) == ncclSuccess,
                "%s", err);
  return p;
}

START_TEST(test_legacy_names) {
  char path[1024];
  char *t0 = read_text(plan_path(path, sizeof(path), "good/ar2_ll.json"), NULL);
  char *t1 = replace_all(t0, "\"respkt\"", "\"rspkt\"");
  char *t2 = replace_all(t1, "\"memory\"", "\"sm\"");
  char *t3 = replace_all(t2, "\"upkt\"", "\"cpkt\""); /* v0.7 cpkt = copy out of packets */
  pcl_plan_t *p = load_text_ok("legacy.json", t3);
  ck_assert_int_eq(p->legacy_names, 1);
  const pcl_plan_block_t *b = &p->gpus[0].blocks[0];
  ck_assert_int_eq(b->ops[0].channel_type, PCL_PLAN_CHAN_MEMORY);
  ck_assert_int_eq(b->ops[1].type, PCL_PLAN_OP_RESPKT);
  ck_assert_int_eq(b->ops[2].type, PCL_PLAN_OP_UPKT);
  ck_assert_int_eq(p->gpus[0].n_channels[PCL_PLAN_CHAN_MEMORY], 1);
  pcl_plan_destroy(p);
  /* Other old mnemonics. */
  static const struct {
    const char *old;
    int now;
  } m[] = {{"rrc", PCL_PLAN_OP_RRE},
           {"rrcs", PCL_PLAN_OP_RRES},
           {"rs", PCL_PLAN_OP_RES},
           {"rpkt", PCL_PLAN_OP_REPKT},
           {"tpkt", PCL_PLAN_OP_CPKT}};
  for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
    char text[512];
    snprintf(text, sizeof(text),
             "{\"name\":\"l\",\"collective\":\"allreduce\",\"protocol\":\"LL\",\"inplace\":true,"
             "\"gpus\":[{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1,"
             "\"threadblocks\":[{\"id\":0,\"ops\":[{\"name\":\"%s\"}]}]}]}",
             m[i].old);
    char err[512];
    pcl_plan_t *q = NULL;
    /* These ops lack their buffers, so the plan is refused, but the message names the current
     * op: proof of the mapping. */
    ck_assert_int_eq(pcl_plan_load_buffer("old.json", text, strlen(text), &q, err, sizeof(err)),
                     ncclInvalidArgument);
    char want[64];
    snprintf(want, sizeof(want), "op '%s'", pcl_plan_op_name((pcl_plan_op_type_t)m[i].now));
    ck_assert_msg(strstr(err, want) != NULL, "%s -> %s", m[i].old, err);
  }
  /* Without old names, "cpkt" is the current copy-to-packets op. */
  pcl_plan_t *cur = load_ok("good/ag2_port_ll.json");
  ck_assert_int_eq(cur->legacy_names, 0);
  ck_assert_int_eq(cur->gpus[0].blocks[0].ops[0].type, PCL_PLAN_OP_CPKT);
  pcl_plan_destroy(cur);
  free(t0);
  free(t1);
  free(t2);
  free(t3);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_defaults_and_extensions) {
  const char *minimal =
      "{\"name\":\"m\",\"collective\":\"broadcast\",\"protocol\":\"Simple\",\"inplace\":false,"
      "\"gpus\":[{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
      "\"threadblocks\":[{\"id\":0,\"ops\":[{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\","
      "\"index\":0,\"size\":1}],\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]}]}]}]}";
  pcl_plan_t *p = load_text_ok("minimal.json", minimal);
  ck_assert_int_eq(p->collective, PCL_PLAN_COLL_BROADCAST);
  ck_assert_int_eq(p->num_threads_per_block, 1024);
  ck_assert_uint_eq(p->buffer_alignment, 16);
  ck_assert_uint_eq(p->min_message_size, 0);
  ck_assert_uint_eq(p->max_message_size, UINT64_MAX);
  ck_assert_int_eq(p->nranks_per_node, 1);
  ck_assert_int_eq(p->priority, 0);
  ck_assert_int_eq(p->reuse_resources, 0);
  ck_assert_int_eq(p->gpus[0].n_channels[0] + p->gpus[0].n_channels[1], 0);
  pcl_plan_destroy(p);

  char path[1024];
  char *t0 = read_text(plan_path(path, sizeof(path), "good/ar2_ll.json"), NULL);
  char *t1 = replace_all(t0, "\"inplace\": true,",
                         "\"inplace\": true, \"outofplace_ok\": true, \"priority\": -3, "
                         "\"nranks_per_node\": 2, \"_comment\": \"ignored\",");
  char *t2 = replace_all(t1, "\"reduce_op\": \"sum\"", "\"reduce_op\": \"max\"");
  p = load_text_ok("ext.json", t2);
  ck_assert_int_eq(p->outofplace_ok, 1);
  ck_assert_int_eq(p->priority, -3);
  ck_assert_int_eq(p->nranks_per_node, 2);
  ck_assert_int_eq(p->gpus[1].blocks[0].ops[1].reduce_op, PCL_PLAN_RED_MAX);
  pcl_plan_destroy(p);
  free(t0);
  free(t1);
  free(t2);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Without nranks_per_node (MSCCL++'s plans) the nodes are the ranks the memory channels join;
 * a plan with none is one node. */
START_TEST(test_nodes_inferred) {
  char path[1024];
  char *t0 = read_text(plan_path(path, sizeof(path), "good/mn_ar_2x2.json"), NULL);
  char *t1 = replace_all(t0, "\"nranks_per_node\": 2,", "");
  ck_assert_ptr_ne(strstr(t0, "\"nranks_per_node\": 2,"), NULL);
  pcl_plan_t *p = load_text_ok("mn.json", t1);
  ck_assert_int_eq(p->n_gpus, 4);
  ck_assert_int_eq(p->nranks_per_node_given, 0);
  ck_assert_int_eq(p->nranks_per_node, 2);
  pcl_plan_destroy(p);
  p = load_ok("good/ag2_port.json"); /* port channels only */
  ck_assert_int_eq(p->nranks_per_node, 2);
  pcl_plan_destroy(p);
  p = load_ok("conformance/allreduce_packet_2.json");
  ck_assert_int_eq(p->nranks_per_node, 2);
  pcl_plan_destroy(p);
  free(t0);
  free(t1);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_names) {
  ck_assert_str_eq(pcl_plan_coll_name(PCL_PLAN_COLL_REDUCESCATTER), "reducescatter");
  ck_assert_int_eq(pcl_plan_coll_from_name("allgather"), PCL_PLAN_COLL_ALLGATHER);
  ck_assert_int_eq(pcl_plan_coll_from_name("nope"), -1);
  ck_assert_str_eq(pcl_plan_op_name(PCL_PLAN_OP_RECSPKT), "recspkt");
  ck_assert_str_eq(pcl_plan_op_name(PCL_PLAN_OP_SEM_ACQUIRE), "sem_acquire");
  ck_assert_str_eq(pcl_plan_chan_name(PCL_PLAN_CHAN_PORT), "port");
  ck_assert_str_eq(pcl_plan_chan_name(PCL_PLAN_CHAN_NONE), "none");
  ck_assert_str_eq(pcl_plan_buf_name(PCL_PLAN_BUF_SCRATCH), "scratch");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A port recspkt: dst_buff[0..1] local (result, packet copy), one channel per remote dst from
 * dst_buff[2] on (the kernel's proxy puts dst_buff[1] there), every dst from [1] in packets. */
START_TEST(test_port_recspkt) {
  pcl_plan_t *p = load_ok("good/ar2_port_recspkt.json");
  for (int r = 0; r < 2; r++) {
    const pcl_plan_op_t *op = &p->gpus[r].blocks[0].ops[3];
    ck_assert_int_eq(op->type, PCL_PLAN_OP_RECSPKT);
    ck_assert_int_eq(op->channel_type, PCL_PLAN_CHAN_PORT);
    ck_assert_int_eq(op->n_channels, 1);
    ck_assert_int_eq(op->n_dst, 3);
    ck_assert_int_eq(op->dst[1].kind, PCL_PLAN_REF_LOCAL);
    ck_assert_int_eq(op->dst[2].kind, PCL_PLAN_REF_REMOTE);
    ck_assert_int_eq(op->dst[2].rank, 1 - r);
    ck_assert(!pcl_plan_operand_is_packet(op, 1, 0));
    ck_assert(pcl_plan_operand_is_packet(op, 1, 1) && pcl_plan_operand_is_packet(op, 1, 2));
  }
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Truncating every good plan at many points must never crash or leak. */
/* An explicit reduce_op binds the plan to that op; none means the call's op. */
START_TEST(test_accepts_op) {
  pcl_plan_t *fixed = load_ok("good/ar2_ll.json"); /* names reduce_op "sum" */
  ck_assert_int_eq(fixed->reduce_ops_mask, 1u << PCL_PLAN_RED_SUM);
  ck_assert(pcl_plan_accepts_op(fixed, PCL_PLAN_RED_SUM));
  ck_assert(pcl_plan_accepts_op(fixed, PCL_PLAN_RED_AVG));
  ck_assert(!pcl_plan_accepts_op(fixed, PCL_PLAN_RED_MAX));
  ck_assert(!pcl_plan_accepts_op(fixed, PCL_PLAN_RED_PROD));
  ck_assert(!pcl_plan_accepts_op(fixed, 7));
  pcl_plan_destroy(fixed);
  pcl_plan_t *free_op = load_text_ok(
      "free.json",
      "{\"name\":\"f\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":true,"
      "\"gpus\":[{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
      "\"channels\":[],\"remote_buffers\":[],\"semaphores\":[],\"threadblocks\":[{\"id\":0,"
      "\"channels\":[],\"remote_buffer_refs\":[],\"ops\":[{\"name\":\"re\",\"src_buff\":"
      "[{\"type\":\"i\",\"index\":0,\"size\":1}],\"dst_buff\":[{\"type\":\"i\",\"index\":0,"
      "\"size\":1}]}]}]}]}");
  ck_assert_int_eq(free_op->reduce_ops_mask, 0);
  for (int op = PCL_PLAN_RED_SUM; op <= PCL_PLAN_RED_AVG; op++)
    ck_assert(pcl_plan_accepts_op(free_op, op));
  pcl_plan_destroy(free_op);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_truncated_plans) {
  char path[1024];
  size_t len = 0;
  char *t = read_text(plan_path(path, sizeof(path), "good/ar2_pipeline_sem.json"), &len);
  ck_assert_ptr_nonnull(t);
  while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == ' '))
    len--; /* last byte is '}' */
  for (size_t cut = 0; cut < len; cut += 7) {
    pcl_plan_t *p = NULL;
    char err[512];
    ncclResult_t r = pcl_plan_load_buffer("cut.json", t, cut, &p, err, sizeof(err));
    ck_assert_int_eq(r, ncclInvalidArgument);
    ck_assert_ptr_null(p);
  }
  free(t);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_good_plans_load);
  tcase_add_test(tc, test_bad_plans_refused);
  tcase_add_test(tc, test_conformance_in_repo);
  tcase_add_test(tc, test_conformance_shared);
  tcase_add_test(tc, test_io_error);
  tcase_add_test(tc, test_structs_ar2_ll);
  tcase_add_test(tc, test_pipeline_flattened);
  tcase_add_test(tc, test_legacy_names);
  tcase_add_test(tc, test_defaults_and_extensions);
  tcase_add_test(tc, test_nodes_inferred);
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_truncated_plans);
  tcase_add_test(tc, test_accepts_op);
  tcase_add_test(tc, test_text_errors);
  tcase_add_test(tc, test_port_recspkt);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
