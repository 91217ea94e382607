/* SPDX-License-Identifier: MIT
 * CPU simulator suite: arithmetic definitions (fp16/bf16/fp8, avg), every valid test plan, the
 * MSCCL++ conformance plans and every shipped plan simulate correctly; deliberately broken (but
 * valid) plans are shown wrong, uninitialised or deadlocked with a message naming the op; the
 * capture hook hands out each rank's inputs and bit-exact outputs (pairwise rounding order). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pcl_test.h"
#include "plan.h"
#include "plan_test_util.h"
#include "sim.h"
#include "sim_int.h"
#include "sim_test_util.h"

/* ---- helpers -------------------------------------------------------------------------------- */

#define FILE_LIST_MAX 256
typedef struct {
  char paths[FILE_LIST_MAX][512];
  int n;
} file_list_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(a, b);
}

/* *.json files of <source>/<rel> (optionally one level of sub-folders), sorted. */
/* The .json files of `rel`, descending `subdirs` levels of sub-folders (dsl/ skipped). */
static void list_json(file_list_t *fl, const char *rel, int subdirs) {
  char dir[600];
  snprintf(dir, sizeof(dir), "%.300s/%.250s", test_src_dir(), rel);
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    size_t l = strlen(e->d_name);
    char sub[256];
    snprintf(sub, sizeof(sub), "%.120s/%.120s", rel, e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
      ck_assert_msg(fl->n < FILE_LIST_MAX, "more than %d plans under %s", FILE_LIST_MAX, rel);
      snprintf(fl->paths[fl->n++], 512, "%.250s/%.250s", test_src_dir(), sub);
    } else if (subdirs && strcmp(e->d_name, "dsl") != 0) {
      char full[600];
      snprintf(full, sizeof(full), "%.300s/%.250s", test_src_dir(), sub);
      DIR *dd = opendir(full);
      if (dd) {
        closedir(dd);
        list_json(fl, sub, subdirs - 1);
      }
    }
  }
  closedir(d);
  qsort(fl->paths, (size_t)fl->n, sizeof(fl->paths[0]), cmp_str);
}

/* Every dtype x op (x packet format for LL plans) at small sizes. */
static void sweep(const pcl_plan_t *p, const char *path, uint64_t max_bytes, int any_op) {
  int npk = p->protocol == PCL_PLAN_PROTO_LL ? 2 : 1;
  for (int pk = 0; pk < npk; pk++)
    for (int dt = 0; dt < ncclNumTypes; dt++)
      for (int op = 0; op < ncclNumOps; op++)
        expect_ok(p, path, (ncclDataType_t)dt, (ncclRedOp_t)op, (pcl_sim_packet_t)pk, max_bytes, 2,
                  any_op, 1);
}

/* ---- arithmetic ---------------------------------------------------------------------------- */

START_TEST(test_minifloat_roundtrip) {
  ncclDataType_t ts[] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  for (int k = 0; k < 4; k++) {
    int nb = pcl_dtype_bytes(ts[k]) == 2 ? 65536 : 256;
    for (int i = 0; i < nb; i++) {
      uint8_t in[2] = {(uint8_t)i, (uint8_t)(i >> 8)}, out[2] = {0, 0};
      double v = pcl_sim_load(ts[k], in);
      if (isnan(v) || isinf(v))
        continue;
      pcl_sim_store(ts[k], out, v);
      ck_assert_msg(out[0] == in[0] && (nb == 256 || out[1] == in[1]), "%s 0x%04x -> %g",
                    pcl_dtype_name(ts[k]), i, v);
    }
  }
  uint8_t b[2];
  pcl_sim_store(ncclFloat16, b, 1.0 + 1.0 / 2048); /* tie: rounds to even (1.0) */
  ck_assert_int_eq(b[0] | b[1] << 8, 0x3c00);
  pcl_sim_store(ncclFloat16, b, 70000.0); /* IEEE overflow */
  ck_assert_int_eq(b[0] | b[1] << 8, 0x7c00);
  pcl_sim_store(ncclFloat8e4m3, b, 500.0); /* saturates to 448 */
  ck_assert_int_eq(b[0], 0x7e);
  pcl_sim_store(ncclFloat8e5m2, b, -1e9); /* saturates to -57344 */
  ck_assert_int_eq(b[0], 0xfb);
  ck_assert(pcl_sim_load(ncclFloat8e4m3, (uint8_t[]){0x7e}) == 448.0);
  pcl_sim_store(ncclBfloat16, b, 3.0);
  ck_assert_int_eq(b[0] | b[1] << 8, 0x4040);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_reduce_and_avg) {
  int8_t a[4] = {100, -100, 7, -7}, c[4] = {100, -100, 1, -1};
  pcl_sim_reduce(ncclInt8, ncclSum, a, c, 4); /* wraps: 200 -> -56 */
  ck_assert_int_eq(a[0], -56);
  ck_assert_int_eq(a[1], 56);
  pcl_sim_avg_scale(ncclInt8, a, 4, 3); /* truncates toward zero */
  ck_assert_int_eq(a[0], -18);
  ck_assert_int_eq(a[2], 2);
  ck_assert_int_eq(a[3], -2);
  uint32_t u[2] = {7, 0xffffffffu}, v[2] = {3, 2};
  pcl_sim_reduce(ncclUint32, ncclMin, u, v, 2);
  ck_assert_uint_eq(u[0], 3);
  ck_assert_uint_eq(u[1], 2);
  float f[2] = {3.0f, -1.0f}, g[2] = {4.0f, 5.0f};
  pcl_sim_reduce(ncclFloat32, ncclProd, f, g, 2);
  ck_assert(f[0] == 12.0f && f[1] == -5.0f);
  pcl_sim_avg_scale(ncclFloat32, f, 2, 3); /* x * (1/3) in fp32 */
  ck_assert(f[0] == 12.0f * (1.0f / 3.0f));
  uint8_t h[2];
  pcl_sim_store(ncclFloat16, h, 3.0);
  pcl_sim_avg_scale(ncclFloat16, h, 1, 2);
  ck_assert(pcl_sim_load(ncclFloat16, h) == 1.5);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ---- plans that must pass ------------------------------------------------------------------- */

START_TEST(test_good_plans) {
  file_list_t *fl = pcl_calloc(1, sizeof(*fl), "list");
  list_json(fl, "test/data/plans/good", 0);
  ck_assert_int_gt(fl->n, 0);
  for (int i = 0; i < fl->n; i++) {
    pcl_plan_t *p = load_ok(fl->paths[i]);
    expect_ok(p, fl->paths[i], ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 6, 0, 0);
    /* The data flow does not depend on the op: run every dtype/op as the call's op. */
    sweep(p, fl->paths[i], 8 << 10, 1);
    pcl_plan_destroy(p);
  }
  pcl_free(fl);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_conformance_plans) {
  file_list_t *fl = pcl_calloc(1, sizeof(*fl), "list");
  list_json(fl, "test/data/plans/conformance", 0);
  ck_assert_int_gt(fl->n, 0);
  int nrefused = 0, npassed = 0;
  for (int i = 0; i < fl->n; i++) {
    pcl_plan_t *p = NULL;
    char err[1024] = "";
    if (strstr(fl->paths[i], "nvls")) {
      ck_assert_int_ne(pcl_plan_load(fl->paths[i], &p, err, sizeof(err)), ncclSuccess);
      ck_assert_msg(strstr(err, "NVLS") != NULL, "%s: %s", fl->paths[i], err);
      nrefused++;
      continue;
    }
    p = load_ok(fl->paths[i]);
    if (strstr(fl->paths[i], "reduce_tbg_2")) {
      /* Genuine race in MSCCL++'s plan: block 0 of rank 0 gets the part of rank 1's scratch
       * that rank 1's block 1 fills, but only synchronises with rank 1's block 0 (tbg slices
       * span the whole 2-chunk range). Round-robin hides it; rank-ordered greedy shows it. */
      pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
      ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 4, 0, r), PCL_SIM_UNINIT);
      ck_assert_msg(strstr(r->message, "gpus[0].threadblocks[0].ops[7] (get)"), "%s", r->message);
      ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 1, 0, r), PCL_SIM_PASS);
      pcl_free(r);
    } else {
      expect_ok(p, fl->paths[i], ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 6, 0, 0);
      sweep(p, fl->paths[i], 8 << 10, 0); /* reduce_op "sum" fixed: other ops are skipped */
      npassed++;
    }
    pcl_plan_destroy(p);
  }
  ck_assert_int_eq(nrefused, 3);
  ck_assert_int_ge(npassed, 7);
  pcl_free(fl);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_shipped_plans) {
  file_list_t *fl = pcl_calloc(1, sizeof(*fl), "list");
  list_json(fl, "plans", 2); /* plans/<collective>/ and plans/extra/<collective>/ */
  ck_assert_int_ge(fl->n, 6);
  int nsimulated = 0;
  for (int i = 0; i < fl->n; i++) {
    pcl_plan_t *p = load_ok(fl->paths[i]);
    /* The default set (what users' calls run) here, every type and op; the opt-in set is
     * simulated the same way by the plans_simulate_* tests (ctest), too long for this suite
     * under the sanitizers. Shipped plans leave reduce_op out, so every op applies. */
    if (strstr(fl->paths[i], "/plans/extra/") == NULL) {
      sweep(p, fl->paths[i], 16 << 10, 1);
      expect_ok(p, fl->paths[i], ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 4, 1, 0);
      nsimulated++;
    }
    /* Every plan: the ends of its range are runnable sizes (16-byte units per chunk), or at the
     * top, for an elementwise plan whose scratch would pass 4 GiB there, sizes it runs only in
     * segments (the 8-rank Simple reduce above 585 MiB). */
    uint64_t sizes[PCL_SIM_MAX_SIZES];
    int n = pcl_sim_auto_sizes(p, p->max_message_size, sizes, PCL_SIM_MAX_SIZES);
    ck_assert_int_gt(n, 1);
    ck_assert(pcl_plan_size_runnable(p, sizes[0]));
    for (uint64_t b = p->min_message_size; b < sizes[0]; b++)
      ck_assert_msg(!pcl_plan_size_runnable(p, b), "%s: %llu runnable, below the first size %llu",
                    fl->paths[i], (unsigned long long)b, (unsigned long long)sizes[0]);
    if (pcl_plan_size_runnable(p, p->max_message_size))
      ck_assert_msg(sizes[n - 1] == p->max_message_size, "%s: largest runnable size %llu, not %llu",
                    fl->paths[i], (unsigned long long)sizes[n - 1],
                    (unsigned long long)p->max_message_size);
    else
      ck_assert_msg(pcl_plan_size_selectable(p, p->max_message_size) &&
                        pcl_plan_segment_bytes(p, p->max_message_size, 64ull << 20) != 0,
                    "%s: its largest size %llu runs neither whole nor in segments", fl->paths[i],
                    (unsigned long long)p->max_message_size);
    pcl_plan_destroy(p);
  }
  ck_assert_int_ge(nsimulated, 6);
  pcl_free(fl);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ---- plans that must fail, pointing at the op --------------------------------------------------
 */

static void expect_broken(const char *file, pcl_sim_verdict_t want, int nseeds, const char *needle1,
                          const char *needle2) {
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), file));
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  pcl_sim_verdict_t v = run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 64 << 10, nseeds, 1, r);
  ck_assert_msg(v == want, "%s: %s (want %s): %s", file, pcl_sim_verdict_name(v),
                pcl_sim_verdict_name(want), r->message);
  ck_assert_msg(strstr(r->message, needle1), "%s: '%s' not in: %s", file, needle1, r->message);
  if (needle2)
    ck_assert_msg(strstr(r->message, needle2), "%s: '%s' not in: %s", file, needle2, r->message);
  pcl_free(r);
  pcl_plan_destroy(p);
}

START_TEST(test_broken_wrong_chunk) {
  expect_broken("broken/wrong_chunk.json", PCL_SIM_WRONG, 4, "wrong result: rank 0 output byte 0",
                "gpus[0].threadblocks[0].ops[3] (upkt)");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_broken_missing_wait) {
  expect_broken("broken/missing_wait.json", PCL_SIM_UNINIT, 4,
                "gpus[1].threadblocks[0].ops[6] (res)",
                "rank 1's scratch, which nothing ever wrote");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_broken_swapped_peer) {
  expect_broken("broken/swapped_peer.json", PCL_SIM_DEADLOCK, 4,
                "gpus[1].threadblocks[0].ops[1] (respkt)", "never written");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_broken_single_scratch) {
  /* Only an interleaving where a rank runs a call ahead shows it: random schedules (seed >= 3). */
  expect_broken("broken/single_scratch.json", PCL_SIM_DEADLOCK, 12, "(repkt)", "from a later call");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_skip_and_sizes) {
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "good/ar2_ll.json"));
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  /* reduce_op "sum" in the plan: a max call does not apply. */
  ck_assert_int_eq(run(p, ncclFloat32, ncclMax, PCL_SIM_LL16, 0, 1, 0, r), PCL_SIM_SKIPPED);
  ck_assert_int_eq(pcl_sim_plan_supports_op(p, ncclAvg), 1);
  /* Explicit sizes: non-runnable ones are dropped. */
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  uint64_t sizes[] = {3, 4096, 4100};
  o.sizes = sizes;
  o.nsizes = 3;
  ck_assert_int_eq(pcl_sim_run(p, &o, r), ncclSuccess);
  ck_assert_int_eq(r->verdict, PCL_SIM_PASS);
  ck_assert_int_eq(r->nsizes, 1);
  ck_assert_uint_eq(r->sizes[0], 4096);
  pcl_free(r);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ---- other collectives, inline plans ------------------------------------------------------- */

#define MEMCH(peer) "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[" #peer "]}]"
#define TBCH "\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}]"
#define TBRB                                                                                       \
  "\"remote_buffer_refs\":[{\"access_channel_type\":\"memory\",\"remote_buffer_ids\":[0]}]"

/* Broadcast from root 0 (Simple): rank 1 says it is ready, rank 0 puts into rank 1's output. */
static const char k_bcast[] =
    "{\"name\":\"bc2\",\"collective\":\"broadcast\",\"protocol\":\"Simple\",\"inplace\":false,"
    "\"gpus\":["
    "{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0," MEMCH(
        1) ","
           "\"remote_buffers\":[{\"rank\":1,\"type\":\"o\",\"access_channel_types\":[\"memory\"]}],"
           "\"threadblocks\":[{\"id\":0," TBCH "," TBRB ",\"ops\":["
           "{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]},{\"name\":\"nop\"},"
           "{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],"
           "\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]},"
           "{\"name\":\"put\",\"channel_type\":\"memory\",\"src_buff\":[{\"type\":\"i\",\"index\":"
           "0,"
           "\"size\":1}],\"dst_buff\":[{\"buffer_id\":0,\"index\":0,\"size\":1}]},{\"name\":"
           "\"nop\"},"
           "{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]},"
           "{\"id\":1,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0," MEMCH(
               0) ","
                  "\"threadblocks\":[{\"id\":0," TBCH ",\"ops\":["
                  "{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]},"
                  "{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]}]}";

/* Reduce to root 0 (LL): rank 1 packs its input into rank 0's scratch, rank 0 reduces and then
 * signals "consumed", which rank 1 waits for before its call ends. Without that wait rank 1 runs
 * calls ahead and overwrites packets rank 0 has not read (double scratch covers one call). */
static const char k_reduce[] =
    "{\"name\":\"re2\",\"collective\":\"reduce\",\"protocol\":\"LL\",\"inplace\":false,"
    "\"use_double_scratch_buffer\":true,\"gpus\":["
    "{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1," MEMCH(
        1) ","
           "\"threadblocks\":[{\"id\":0," TBCH ",\"ops\":["
           "{\"name\":\"repkt\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1},"
           "{\"type\":\"s\",\"index\":0,\"size\":1}],\"dst_buff\":[{\"type\":\"o\",\"index\":0,"
           "\"size\":1}]},{\"name\":\"nop\"},"
           "{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]},"
           "{\"id\":1,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1," MEMCH(
               0) ","
                  "\"remote_buffers\":[{\"rank\":0,\"type\":\"s\",\"access_channel_types\":["
                  "\"memory\"]}],"
                  "\"threadblocks\":[{\"id\":0," TBCH "," TBRB ",\"ops\":["
                  "{\"name\":\"ppkt\",\"channel_type\":\"memory\",\"src_buff\":[{\"type\":\"i\","
                  "\"index\":0,"
                  "\"size\":1}],\"dst_buff\":[{\"buffer_id\":0,\"index\":0,\"size\":1}]},"
                  "{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]}]}";

START_TEST(test_broadcast_and_reduce) {
  pcl_plan_t *p = load_text("bcast", k_bcast);
  sweep(p, "bcast", 8 << 10, 0);
  expect_ok(p, "bcast", ncclFloat32, ncclSum, PCL_SIM_LL16, 0, 6, 0, 0);
  pcl_plan_destroy(p);
  p = load_text("reduce", k_reduce);
  sweep(p, "reduce", 8 << 10, 0);
  expect_ok(p, "reduce", ncclFloat64, ncclMax, PCL_SIM_LL8, 0, 6, 1, 0);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_outofplace_ok_is_checked) {
  /* The one-phase in-place allreduce writes its result into the input: claiming it also works
   * out of place is wrong, and the simulator's out-of-place run shows it. */
  char path[512];
  snprintf(path, sizeof(path), "%s/plans/allreduce/2gpu_ll1_inplace.json", test_src_dir());
  char *text = read_text(path, NULL);
  ck_assert(text != NULL);
  char *bad = replace_all(text, "\"inplace\": true", "\"inplace\": true, \"outofplace_ok\": true");
  pcl_plan_t *p = load_text("oop_claim", bad);
  ck_assert_int_eq(p->outofplace_ok, 1);
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  ck_assert_int_eq(run(p, ncclFloat32, ncclSum, PCL_SIM_LL16, 4096, 1, 1, r), PCL_SIM_WRONG);
  ck_assert_msg(strstr(r->message, "out-of-place buffers"), "%s", r->message);
  pcl_free(r);
  pcl_plan_destroy(p);
  free(text);
  free(bad);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ---- the capture hook -------------------------------------------------------------------- */

#define CAP_MAX 16

/* Copies of everything the hook was handed, in call order. */
typedef struct {
  int n;
  int per_rank[8];
  int rank[CAP_MAX], call[CAP_MAX], inplace[CAP_MAX], ok[CAP_MAX];
  uint64_t size[CAP_MAX], seed[CAP_MAX], in_bytes[CAP_MAX], out_bytes[CAP_MAX];
  uint8_t *in[CAP_MAX], *out[CAP_MAX];
} cap_log_t;

static void cap_record(void *arg, const pcl_sim_capture_t *c) {
  cap_log_t *l = arg;
  ck_assert_int_lt(l->n, CAP_MAX);
  ck_assert(c->rank >= 0 && c->rank < 8);
  int k = l->n++;
  l->per_rank[c->rank]++;
  l->rank[k] = c->rank;
  l->call[k] = c->call;
  l->inplace[k] = c->inplace;
  l->ok[k] = c->checked_ok;
  l->size[k] = c->size;
  l->seed[k] = c->seed;
  l->in_bytes[k] = c->in_bytes;
  l->out_bytes[k] = c->out_bytes;
  l->in[k] = pcl_calloc(c->in_bytes, 1, "capture copy");
  l->out[k] = pcl_calloc(c->out_bytes, 1, "capture copy");
  memcpy(l->in[k], c->input, c->in_bytes);
  memcpy(l->out[k], c->output, c->out_bytes);
}

static void cap_free(cap_log_t *l) {
  for (int k = 0; k < l->n; k++) {
    pcl_free(l->in[k]);
    pcl_free(l->out[k]);
  }
  memset(l, 0, sizeof(*l));
}

/* The capture of `rank` (the log holds one run of one call). */
static int cap_of(const cap_log_t *l, int rank) {
  for (int k = 0; k < l->n; k++)
    if (l->rank[k] == rank)
      return k;
  ck_abort_msg("no capture for rank %d", rank);
  return -1;
}

/* One size, one seed, one call, one layout, the hook logging into *l. */
static pcl_sim_verdict_t run_captured(const pcl_plan_t *p, ncclDataType_t dt, ncclRedOp_t op,
                                      uint64_t size, uint64_t seed, pcl_sim_layout_t layout,
                                      pcl_sim_sched_t sched, int rounding, cap_log_t *l,
                                      pcl_sim_result_t *r) {
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  o.dtype = dt;
  o.op = op;
  o.sizes = &size;
  o.nsizes = 1;
  o.seed = seed;
  o.nseeds = 1;
  o.calls_per_size = 1;
  o.layout = layout;
  o.schedule = sched;
  o.rounding_inputs = rounding;
  o.capture = cap_record;
  o.capture_arg = l;
  ck_assert_int_eq(pcl_sim_run(p, &o, r), ncclSuccess);
  return r->verdict;
}

/* Independent arithmetic: fp32 natively, bf16 as fp32 rounded to nearest even on every step
 * (the kernel's pcl_kred), int32 wrapping. */
static float bf16_to_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u); /* no NaN among the inputs */
  return (uint16_t)(u >> 16);
}

/* Element e of rank k's input, and acc + it, in the dtype (as raw bits in a uint32). */
static uint32_t elem(const cap_log_t *l, int rank, ncclDataType_t dt, uint64_t e) {
  const uint8_t *b = l->in[cap_of(l, rank)];
  uint32_t v = 0;
  memcpy(&v, b + e * (dt == ncclBfloat16 ? 2 : 4), dt == ncclBfloat16 ? 2 : 4);
  return v;
}
static uint32_t add_step(ncclDataType_t dt, uint32_t a, uint32_t b) {
  if (dt == ncclInt32)
    return a + b;
  if (dt == ncclBfloat16)
    return f_to_bf16(bf16_to_f((uint16_t)a) + bf16_to_f((uint16_t)b));
  float x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  x = x + y;
  memcpy(&a, &x, 4);
  return a;
}

/* Checks an n-rank allreduce-sum capture against the pairwise sum in order(c, j) (the j-th
 * source of chunk c's reduction); returns how many elements differ from the rank-order sum
 * x0 + x1 + ... (0 unless rounding shows the order). */
static int check_allreduce(const cap_log_t *l, int n, ncclDataType_t dt, uint64_t size,
                           int (*order)(int c, int j, int n)) {
  uint64_t es = dt == ncclBfloat16 ? 2 : 4, ne = size / es, per = ne / (uint64_t)n;
  int reordered = 0;
  ck_assert_int_eq(l->n, n);
  for (int r = 0; r < n; r++) {
    int k = cap_of(l, r);
    ck_assert_int_eq(l->per_rank[r], 1);
    ck_assert_int_eq(l->ok[k], 1);
    ck_assert_uint_eq(l->in_bytes[k], size);
    ck_assert_uint_eq(l->out_bytes[k], size);
    for (uint64_t e = 0; e < ne; e++) {
      int c = (int)(e / per);
      uint32_t want = elem(l, order(c, 0, n), dt, e), plain = elem(l, 0, dt, e), got = 0;
      for (int j = 1; j < n; j++) {
        want = add_step(dt, want, elem(l, order(c, j, n), dt, e));
        plain = add_step(dt, plain, elem(l, j, dt, e));
      }
      memcpy(&got, l->out[k] + e * es, es);
      ck_assert_msg(got == want, "rank %d element %llu: got 0x%x, want 0x%x", r,
                    (unsigned long long)e, got, want);
      reordered += r == 0 && want != plain;
    }
  }
  return reordered;
}

/* ar2_ll: chunk c = x_c + x_(1-c); ar4_ll: chunk c = ((x_c + x_c+1) + x_c+2) + x_c+3. */
static int order_own_first(int c, int j, int n) {
  return (c + j) % n;
}

START_TEST(test_capture_allreduce_2_and_4_ranks) {
  const char *files[] = {"good/ar2_ll.json", "good/ar4_ll.json"};
  const int nr[] = {2, 4};
  const ncclDataType_t dts[] = {ncclInt32, ncclFloat32, ncclBfloat16};
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  cap_log_t *l = pcl_calloc(1, sizeof(*l), "log");
  for (int f = 0; f < 2; f++) {
    char path[512];
    pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), files[f]));
    for (int d = 0; d < 3; d++)
      for (int rounding = 0; rounding < 2; rounding++) {
        uint64_t size = 4096;
        pcl_sim_verdict_t v = run_captured(p, dts[d], ncclSum, size, 5, PCL_SIM_LAYOUT_ALL,
                                           PCL_SIM_SCHED_BY_SEED, rounding, l, r);
        ck_assert_msg(v == PCL_SIM_PASS, "%s: %s", files[f], r->message);
        ck_assert_int_eq(l->inplace[0], 1);
        ck_assert_uint_eq(l->size[0], size);
        ck_assert_uint_eq(l->seed[0], 5);
        ck_assert_int_eq(l->call[0], 0);
        int reordered = check_allreduce(l, nr[f], dts[d], size, order_own_first);
        /* Generated inputs keep float sums exact; rounding ones make the 4-rank plan's order
         * (which is not rank order for chunks 1..3) show in the last bits. */
        if (!rounding || dts[d] == ncclInt32 || nr[f] == 2)
          ck_assert_int_eq(reordered, 0);
        else
          ck_assert_int_gt(reordered, 0);
        cap_free(l);
      }
    pcl_plan_destroy(p);
  }
  pcl_free(l);
  pcl_free(r);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_capture_inputs_are_the_ones_used) {
  /* Allgather: every rank's output slot k is, bit for bit, the input the hook reports for rank
   * k; the same seed gives the same inputs again, another seed others. */
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "good/ag4_ll.json"));
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  cap_log_t *l = pcl_calloc(2, sizeof(*l), "log");
  uint64_t size = 4 * 1024; /* total output */
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(run_captured(p, ncclUint8, ncclSum, size, k == 0 ? 3 : 4, PCL_SIM_LAYOUT_ALL,
                                  PCL_SIM_SCHED_BY_SEED, 0, &l[k], r),
                     PCL_SIM_PASS);
  ck_assert_int_eq(l[0].n, 4);
  for (int rk = 0; rk < 4; rk++) {
    int k = cap_of(&l[0], rk);
    ck_assert_int_eq(l[0].inplace[k], 0);
    ck_assert_uint_eq(l[0].in_bytes[k], size / 4);
    ck_assert_uint_eq(l[0].out_bytes[k], size);
    for (int src = 0; src < 4; src++)
      ck_assert(memcmp(l[0].out[k] + (uint64_t)src * (size / 4), l[0].in[cap_of(&l[0], src)],
                       size / 4) == 0);
    ck_assert(memcmp(l[0].in[k], l[1].in[cap_of(&l[1], rk)], size / 4) != 0);
  }
  cap_free(&l[1]);
  ck_assert_int_eq(run_captured(p, ncclUint8, ncclSum, size, 3, PCL_SIM_LAYOUT_ALL,
                                PCL_SIM_SCHED_BY_SEED, 0, &l[1], r),
                   PCL_SIM_PASS);
  for (int rk = 0; rk < 4; rk++)
    ck_assert(memcmp(l[0].in[cap_of(&l[0], rk)], l[1].in[cap_of(&l[1], rk)], size / 4) == 0);
  cap_free(&l[0]);
  cap_free(&l[1]);
  pcl_free(l);
  pcl_free(r);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_capture_layouts) {
  /* ag4_ll marked in-place with outofplace_ok runs both ways (its copy into o[r] is then a
   * copy onto itself). ALL: in-place calls first, then separate buffers; the in-place input is
   * slot `rank` of the output buffer the hook reports. */
  char path[512];
  char *text = read_text(plan_path(path, sizeof(path), "good/ag4_ll.json"), NULL);
  ck_assert_ptr_nonnull(text);
  char *both =
      replace_all(text, "\"inplace\": false", "\"inplace\": true, \"outofplace_ok\": true");
  pcl_plan_t *p = load_text("ag4_both", both);
  pcl_plan_t *oop = load_text("ag4", text);
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  cap_log_t *l = pcl_calloc(1, sizeof(*l), "log");
  uint64_t size = 2048;
  ck_assert_int_eq(run_captured(p, ncclInt32, ncclSum, size, 1, PCL_SIM_LAYOUT_ALL,
                                PCL_SIM_SCHED_BY_SEED, 0, l, r),
                   PCL_SIM_PASS);
  ck_assert_int_eq(l->n, 8);
  for (int k = 0; k < 8; k++) {
    ck_assert_int_eq(l->inplace[k], k < 4);
    ck_assert_int_eq(l->ok[k], 1);
    ck_assert(memcmp(l->out[k] + (uint64_t)l->rank[k] * (size / 4), l->in[k], size / 4) == 0);
  }
  cap_free(l);
  for (int lay = PCL_SIM_LAYOUT_INPLACE; lay <= PCL_SIM_LAYOUT_OUTOFPLACE; lay++) {
    ck_assert_int_eq(run_captured(p, ncclInt32, ncclSum, size, 1, (pcl_sim_layout_t)lay,
                                  PCL_SIM_SCHED_BY_SEED, 0, l, r),
                     PCL_SIM_PASS);
    ck_assert_int_eq(l->n, 4);
    for (int k = 0; k < 4; k++)
      ck_assert_int_eq(l->inplace[k], lay == PCL_SIM_LAYOUT_INPLACE);
    cap_free(l);
  }
  /* A layout the plan cannot run is skipped, with no call at all. */
  ck_assert_int_eq(run_captured(oop, ncclInt32, ncclSum, size, 1, PCL_SIM_LAYOUT_INPLACE,
                                PCL_SIM_SCHED_BY_SEED, 0, l, r),
                   PCL_SIM_SKIPPED);
  ck_assert_msg(strstr(r->message, "in-place"), "%s", r->message);
  ck_assert_int_eq(l->n, 0);
  pcl_plan_t *ar = load_ok(plan_path(path, sizeof(path), "good/ar2_ll.json"));
  ck_assert_int_eq(run_captured(ar, ncclInt32, ncclSum, size, 1, PCL_SIM_LAYOUT_OUTOFPLACE,
                                PCL_SIM_SCHED_BY_SEED, 0, l, r),
                   PCL_SIM_SKIPPED);
  ck_assert_int_eq(l->n, 0);
  /* Out-of-range options are refused. */
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  o.layout = (pcl_sim_layout_t)7;
  ck_assert_int_eq(pcl_sim_run(ar, &o, r), ncclInvalidArgument);
  pcl_sim_opts_init(&o);
  o.schedule = (pcl_sim_sched_t)-1;
  ck_assert_int_eq(pcl_sim_run(ar, &o, r), ncclInvalidArgument);
  pcl_plan_destroy(ar);
  pcl_plan_destroy(p);
  pcl_plan_destroy(oop);
  pcl_free(l);
  pcl_free(r);
  free(text);
  free(both);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_capture_every_schedule_same_bits) {
  /* One seed under each forced policy: the schedule changes the interleaving, never a bit of
   * the result (rounding inputs, so a changed reduction order would show). */
  char path[512];
  pcl_plan_t *p = load_ok(plan_path(path, sizeof(path), "good/ar4_ll_recspkt.json"));
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  cap_log_t *l = pcl_calloc(2, sizeof(*l), "log");
  uint64_t size = 8192, steps[5];
  for (int sc = PCL_SIM_SCHED_BY_SEED; sc <= PCL_SIM_SCHED_RANDOM; sc++) {
    cap_log_t *cur = sc == 0 ? &l[0] : &l[1];
    ck_assert_int_eq(run_captured(p, ncclFloat16, ncclSum, size, 9, PCL_SIM_LAYOUT_ALL,
                                  (pcl_sim_sched_t)sc, 1, cur, r),
                     PCL_SIM_PASS);
    steps[sc] = r->steps;
    ck_assert_int_eq(cur->n, 4);
    for (int rk = 0; rk < 4; rk++) {
      ck_assert_int_eq(cur->per_rank[rk], 1);
      ck_assert(memcmp(cur->out[cap_of(cur, rk)], l[0].out[cap_of(&l[0], rk)], size) == 0);
      ck_assert(memcmp(cur->in[cap_of(cur, rk)], l[0].in[cap_of(&l[0], rk)], size) == 0);
    }
    if (sc)
      cap_free(cur);
  }
  /* Seed 9 picks the random policy by itself: same run as forcing it. */
  ck_assert_uint_eq(steps[PCL_SIM_SCHED_BY_SEED], steps[PCL_SIM_SCHED_RANDOM]);
  ck_assert_uint_ne(steps[PCL_SIM_SCHED_ROUND_ROBIN], steps[PCL_SIM_SCHED_GREEDY_UP]);
  cap_free(&l[0]);
  pcl_free(l);
  pcl_free(r);
  pcl_plan_destroy(p);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_rounding_inputs_pass) {
  /* With inputs that round, every good plan still passes the check (reordering bound) for every
   * float dtype and op, LL16 and LL8. */
  file_list_t *fl = pcl_calloc(1, sizeof(*fl), "list");
  list_json(fl, "test/data/plans/good", 0);
#ifdef PCL_TEST_SANITIZED
  /* The sanitizer build checks memory safety (the same code for every type: one is enough); the
   * plain build runs every float type. */
  ncclDataType_t fts[] = {ncclFloat32};
#else
  ncclDataType_t fts[] = {ncclFloat16,  ncclFloat32,    ncclFloat64,
                          ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#endif
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  for (int i = 0; i < fl->n; i++) {
    pcl_plan_t *p = load_ok(fl->paths[i]);
    int npk = p->protocol == PCL_PLAN_PROTO_LL ? 2 : 1;
    for (int pk = 0; pk < npk; pk++)
      for (size_t d = 0; d < sizeof(fts) / sizeof(fts[0]); d++)
        for (int op = 0; op < ncclNumOps; op++) {
          pcl_sim_opts_t o;
          pcl_sim_opts_init(&o);
          o.dtype = fts[d];
          o.op = (ncclRedOp_t)op;
          o.packet = (pcl_sim_packet_t)pk;
          o.max_bytes = 8 << 10;
          o.nseeds = 2;
          o.call_op_everywhere = 1;
          o.rounding_inputs = 1;
          ck_assert_int_eq(pcl_sim_run(p, &o, r), ncclSuccess);
          ck_assert_msg(r->verdict == PCL_SIM_PASS || r->verdict == PCL_SIM_SKIPPED,
                        "%s %s/%s: %s: %s", fl->paths[i], pcl_dtype_name(fts[d]),
                        pcl_sim_op_name((ncclRedOp_t)op), pcl_sim_verdict_name(r->verdict),
                        r->message);
        }
    pcl_plan_destroy(p);
  }
  pcl_free(r);
  pcl_free(fl);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_minifloat_roundtrip);
  tcase_add_test(tc, test_reduce_and_avg);
  tcase_add_test(tc, test_good_plans);
  tcase_add_test(tc, test_conformance_plans);
  tcase_add_test(tc, test_shipped_plans);
  tcase_add_test(tc, test_broken_wrong_chunk);
  tcase_add_test(tc, test_broken_missing_wait);
  tcase_add_test(tc, test_broken_swapped_peer);
  tcase_add_test(tc, test_broken_single_scratch);
  tcase_add_test(tc, test_skip_and_sizes);
  tcase_add_test(tc, test_broadcast_and_reduce);
  tcase_add_test(tc, test_outofplace_ok_is_checked);
  tcase_add_test(tc, test_capture_allreduce_2_and_4_ranks);
  tcase_add_test(tc, test_capture_inputs_are_the_ones_used);
  tcase_add_test(tc, test_capture_layouts);
  tcase_add_test(tc, test_capture_every_schedule_same_bits);
  tcase_add_test(tc, test_rounding_inputs_pass);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
