/* SPDX-License-Identifier: MIT
 * The dispatch decision (pcl_dispatch_decide) for a table of requests against the shipped 2-GPU
 * plans, an opt-in broadcast, the zero-copy allreduce and two test plans in a temporary plan
 * directory: each collective, in/out-of-place, broadcast roots, registered buffers, sizes at and
 * around every plan's range ends, dtypes and ops the kernels lack, the forced list, disabled mode,
 * pass-through comms and no real NCCL; PLANCCL_FORCE_FALLBACK parsing; and the group record
 * (queueing, order, before/after the real group end). No GPU, no shared library. */
#define _GNU_SOURCE
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dispatch.h"
#include "group_int.h"
#include "pcl_test.h"

static char tmpdir[PATH_MAX];
static pcl_registry_t *reg;

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  ck_assert_msg(in != NULL, "cannot open %s", from);
  FILE *out = fopen(to, "wb");
  ck_assert_ptr_nonnull(out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

/* A temporary plan directory `dir` holding copies of the source tree's `files`, loaded. */
static pcl_registry_t *registry_of(const char *const *files, size_t n, char *dir, size_t len) {
  const char *src = getenv("PCL_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  snprintf(dir, len, "/tmp/pcl_dispatch_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  for (size_t i = 0; i < n; i++) {
    char from[PATH_MAX], to[PATH_MAX + 64];
    snprintf(from, sizeof(from), "%s/%s", src, files[i]);
    snprintf(to, sizeof(to), "%s/%02zu_%s", dir, i, strrchr(files[i], '/') + 1);
    copy_file(from, to);
  }
  const char *dirs[] = {dir};
  pcl_registry_t *r = NULL;
  ck_assert_int_eq(pcl_registry_create(dirs, 1, &r), ncclSuccess);
  ck_assert_int_eq(pcl_registry_count(r), (int)n);
  return r;
}

/* The shipped plans and two test plans (a 2-rank reduce-scatter, a 4-rank in-place allreduce). */
static void setup(void) {
  static const char *const files[] = {"plans/allreduce/2gpu_ll1_inplace.json",
                                      "plans/allreduce/2gpu_ll1_outofplace.json",
                                      "plans/allreduce/2gpu_ll1_small_inplace.json",
                                      "plans/allreduce/2gpu_ll1_small_outofplace.json",
                                      "plans/allreduce/2gpu_ll1_large_inplace.json",
                                      "plans/allreduce/2gpu_ll1_large_outofplace.json",
                                      "plans/extra/allreduce/2gpu_ll2_inplace.json",
                                      "plans/extra/allreduce/2gpu_ll2_outofplace.json",
                                      "plans/extra/allgather/2gpu_ll_inplace.json",
                                      "plans/extra/allgather/2gpu_ll_outofplace.json",
                                      "plans/extra/broadcast/2gpu_ll_inplace.json",
                                      "plans/extra/broadcast/2gpu_ll_outofplace.json",
                                      "plans/extra/allreduce/2gpu_zerocopy_outofplace.json",
                                      "test/data/plans/good/rs2_ll.json",
                                      "test/data/plans/good/ar4_ll.json"};
  reg = registry_of(files, sizeof(files) / sizeof(files[0]), tmpdir, sizeof(tmpdir));
}

static void teardown(void) {
  pcl_registry_destroy(reg);
  reg = NULL;
  nftw(tmpdir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* Kernels that support everything but the listed gaps. */
static struct pcl_kernel_caps caps_all(void) {
  struct pcl_kernel_caps c;
  memset(&c, 0, sizeof(c));
  for (int t = 0; t < (int)ncclNumTypes; t++) {
    c.dtypes |= 1u << t;
    c.redops[t] = (1u << ncclNumOps) - 1;
  }
  return c;
}

struct dcase {
  const char *what;
  pcl_coll_t coll;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int inplace, nranks, rpn;
  pcl_path_t path;
  pcl_why_t why;
  const char *plan; /* expected plan name (PLAN), or NULL */
};

#define AR PCL_COLL_ALLREDUCE
#define AG PCL_COLL_ALLGATHER
#define RS PCL_COLL_REDUCESCATTER
#define PLAN PCL_PATH_PLAN
#define NCCL PCL_PATH_NCCL
#define LL1_O "allreduce_2gpu_ll1_outofplace"
#define LL1_I "allreduce_2gpu_ll1_inplace"
#define LL1S_O "allreduce_2gpu_ll1_small_outofplace"
#define LL1S_I "allreduce_2gpu_ll1_small_inplace"
#define LL1L_O "allreduce_2gpu_ll1_large_outofplace"
#define LL2_O "allreduce_2gpu_ll2_outofplace"
#define LL2_I "allreduce_2gpu_ll2_inplace"
#define AG_O "allgather_2gpu_ll_outofplace"
#define AG_I "allgather_2gpu_ll_inplace"

static const struct dcase cases[] = {
    {"count 0", AR, 0, ncclFloat, ncclSum, 0, 2, 2, PCL_PATH_NOOP, PCL_WHY_COUNT0, NULL},
    {"ar below ll1 min", AR, 2, ncclFloat16, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar ll1 min 16B", AR, 4, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1S_O},
    {"ar 12B not 16-multiple", AR, 3, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 15B int8", AR, 15, ncclInt8, ncclMax, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 16B int8", AR, 16, ncclInt8, ncclMax, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1S_O},
    {"ar 17B uint8", AR, 17, ncclUint8, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 2K small max", AR, 512, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1S_O},
    {"ar 2K+16 ll1", AR, 516, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1_O},
    {"ar 32K ll1 max", AR, 8192, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1_O},
    {"ar 32K+16 large", AR, 8196, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1L_O},
    {"ar 64K+16 large", AR, 16388, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1L_O},
    {"ar 128K large max (ll2 min is 128K+1)", AR, 32768, ncclFloat, ncclSum, 0, 2, 2, PLAN,
     PCL_WHY_PLAN, LL1L_O},
    {"ar 128K+16 (16 mod 32, above large)", AR, 32772, ncclFloat, ncclSum, 0, 2, 2, NCCL,
     PCL_WHY_NO_PLAN, NULL},
    {"ar 128K+32 ll2", AR, 32776, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL2_O},
    {"ar 2M ll2 max", AR, 524288, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL2_O},
    {"ar 2M-16 (16 mod 32)", AR, 524284, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 2M+32 above", AR, 524296, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 256M", AR, 64u << 20, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar in-place 1K", AR, 256, ncclFloat, ncclSum, 1, 2, 2, PLAN, PCL_WHY_PLAN, LL1S_I},
    {"ar in-place 4K", AR, 1024, ncclFloat, ncclSum, 1, 2, 2, PLAN, PCL_WHY_PLAN, LL1_I},
    {"ar in-place 1M bf16", AR, 524288, ncclBfloat16, ncclAvg, 1, 2, 2, PLAN, PCL_WHY_PLAN, LL2_I},
    {"ar fp64 prod", AR, 8, ncclFloat64, ncclProd, 0, 2, 2, PLAN, PCL_WHY_PLAN, LL1S_O},
    {"ar 3 ranks", AR, 256, ncclFloat, ncclSum, 0, 3, 3, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 2 ranks on 2 nodes", AR, 256, ncclFloat, ncclSum, 0, 2, 1, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar 4 ranks in-place", AR, 256, ncclFloat, ncclSum, 1, 4, 4, PLAN, PCL_WHY_PLAN,
     "test_ar4_ll"},
    {"ar 4 ranks out-of-place", AR, 256, ncclFloat, ncclSum, 0, 4, 4, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ar premulsum", AR, 256, ncclFloat, ncclNumOps, 0, 2, 2, NCCL, PCL_WHY_PREMULSUM, NULL},
    {"ag 2x4 floats = 32B total", AG, 4, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, AG_O},
    {"ag 2x2 floats = 16B total", AG, 2, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ag in-place 2M total", AG, 262144, ncclFloat, ncclSum, 1, 2, 2, PLAN, PCL_WHY_PLAN, AG_I},
    {"ag 2M+32 total", AG, 262148, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"ag ignores op", AG, 4, ncclFloat, (ncclRedOp_t)77, 0, 2, 2, PLAN, PCL_WHY_PLAN, AG_O},
    {"rs 2x4 floats", RS, 4, ncclFloat, ncclSum, 0, 2, 2, PLAN, PCL_WHY_PLAN, "test_rs2_ll"},
    {"rs avg on a sum plan", RS, 4, ncclFloat, ncclAvg, 0, 2, 2, PLAN, PCL_WHY_PLAN, "test_rs2_ll"},
    {"rs max on a sum plan", RS, 4, ncclFloat, ncclMax, 0, 2, 2, NCCL, PCL_WHY_PLAN_OP, NULL},
    {"rs in-place (no plan)", RS, 4, ncclFloat, ncclSum, 1, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"rs above 1M", RS, 262148, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN, NULL},
    {"broadcast out-of-place", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 0, 2, 2, PLAN,
     PCL_WHY_PLAN, "broadcast_2gpu_ll_outofplace"},
    {"broadcast in-place", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 1, 2, 2, PLAN, PCL_WHY_PLAN,
     "broadcast_2gpu_ll_inplace"},
    {"reduce (no plan)", PCL_COLL_REDUCE, 256, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NO_PLAN,
     NULL},
    {"send", PCL_COLL_SEND, 256, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NOT_PLANNED, NULL},
    {"send count 0 is kept", PCL_COLL_SEND, 0, ncclFloat, ncclSum, 0, 2, 2, NCCL,
     PCL_WHY_NOT_PLANNED, NULL},
    {"alltoall", PCL_COLL_ALLTOALL, 256, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NOT_PLANNED,
     NULL},
    {"gather", PCL_COLL_GATHER, 256, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_NOT_PLANNED, NULL},
    {"size overflow", AG, SIZE_MAX / 2, ncclFloat, ncclSum, 0, 2, 2, NCCL, PCL_WHY_SIZE_OVERFLOW,
     NULL},
};

static struct pcl_dispatch_inputs base_inputs(const struct dcase *c,
                                              const struct pcl_kernel_caps *caps) {
  struct pcl_dispatch_inputs in = {.coll = c->coll,
                                   .count = c->count,
                                   .dtype = c->dtype,
                                   .op = c->op,
                                   .inplace = c->inplace,
                                   .nranks = c->nranks,
                                   .ranks_per_node = c->rpn,
                                   .planccl_ok = 1,
                                   .have_real = 1,
                                   .registry = reg,
                                   .caps = caps};
  return in;
}

static void expect(const struct dcase *c, const struct pcl_dispatch_decision *d, pcl_path_t path,
                   pcl_why_t why, const char *plan) {
  ck_assert_msg(d->path == path && d->why == why, "%s: path %d why %s, want path %d why %s",
                c->what, d->path, pcl_why_name(d->why), path, pcl_why_name(why));
  if (path == PCL_PATH_PLAN) {
    ck_assert_ptr_nonnull(d->plan);
    ck_assert_msg(strcmp(d->plan->name, plan) == 0, "%s: plan %s, want %s", c->what, d->plan->name,
                  plan);
    ck_assert_uint_gt(d->in_bytes + d->out_bytes, 0);
  }
}

START_TEST(test_decide_table) {
  setup();
  struct pcl_kernel_caps caps = caps_all();
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct dcase *c = &cases[i];
    struct pcl_dispatch_inputs in = base_inputs(c, &caps);
    struct pcl_dispatch_decision d;
    pcl_dispatch_decide(&in, &d);
    expect(c, &d, c->path, c->why, c->plan);
    /* Pure: the same inputs again give the same decision. */
    struct pcl_dispatch_decision d2;
    pcl_dispatch_decide(&in, &d2);
    ck_assert(d.path == d2.path && d.why == d2.why && d.plan == d2.plan);
  }
  teardown();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_decide_overrides) {
  setup();
  struct pcl_kernel_caps caps = caps_all();
  const struct dcase planned = {"ar 4K", AR, 1024, ncclFloat,    ncclSum, 0,
                                2,       2,  PLAN, PCL_WHY_PLAN, LL1_O};
  const struct dcase none = {"ar 12B", AR, 3,    ncclFloat,       ncclSum, 0,
                             2,        2,  NCCL, PCL_WHY_NO_PLAN, NULL};
  const struct dcase zero = {"ag count 0",   AG,  0, ncclFloat, ncclSum, 0, 2, 2, PCL_PATH_NOOP,
                             PCL_WHY_COUNT0, NULL};
  struct pcl_dispatch_decision d;
  struct pcl_dispatch_inputs in = base_inputs(&planned, &caps);

  in.disabled = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_DISABLED, NULL);
  in = base_inputs(&planned, &caps);
  in.force_mask = PCL_COLL_BIT(AR);
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_FORCED, NULL);
  in.force_mask = PCL_COLL_BIT(AG) | PCL_COLL_BIT(RS); /* another collective forced: planned */
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, PLAN, PCL_WHY_PLAN, LL1_O);
  in = base_inputs(&planned, &caps);
  in.planccl_ok = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_PASSTHROUGH, NULL);
  in = base_inputs(&planned, &caps);
  in.registry = NULL;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_NO_PLAN, NULL);
  /* A per-call config: the real NCCL, even where a plan fits or the count is 0 (what the
   * config asks of an empty call is NCCL's to say); an error with no real NCCL. */
  in = base_inputs(&planned, &caps);
  in.call_config = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_CALL_CONFIG, NULL);
  ck_assert_str_eq(pcl_why_name(d.why), "per-call config");
  in.have_real = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, PCL_PATH_ERROR, PCL_WHY_CALL_CONFIG, NULL);
  in = base_inputs(&zero, &caps);
  in.call_config = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&zero, &d, NCCL, PCL_WHY_CALL_CONFIG, NULL);

  /* Kernels without bf16, and without max for int32. */
  struct pcl_kernel_caps lacking = caps;
  lacking.dtypes &= ~(1u << ncclBfloat16);
  lacking.redops[ncclInt32] &= ~(1u << ncclMax);
  in = base_inputs(&planned, &lacking);
  in.dtype = ncclBfloat16;
  in.count = 512;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_DTYPE, NULL);
  in.dtype = ncclInt32;
  in.count = 1024;
  in.op = ncclMax;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_REDOP, NULL);
  in.op = ncclMin;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, PLAN, PCL_WHY_PLAN, LL1_O);
  in.caps = NULL;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, NCCL, PCL_WHY_DTYPE, NULL);
  /* allgather has no op: an op the kernels lack does not matter. */
  const struct dcase ag = {"ag", AG, 4, ncclInt32, ncclMax, 0, 2, 2, PLAN, PCL_WHY_PLAN, AG_O};
  in = base_inputs(&ag, &lacking);
  pcl_dispatch_decide(&in, &d);
  expect(&ag, &d, PLAN, PCL_WHY_PLAN, AG_O);

  /* Broadcast/reduce plans are written for root 0 and run any root relabelled; a root outside
   * the communicator goes to NCCL (which reports it). */
  const struct dcase bc = {
      "bc root 1",  PCL_COLL_BROADCAST,         256, ncclFloat, ncclSum, 1, 2, 2, PLAN,
      PCL_WHY_PLAN, "broadcast_2gpu_ll_inplace"};
  in = base_inputs(&bc, &caps);
  in.root = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&bc, &d, PLAN, PCL_WHY_PLAN, "broadcast_2gpu_ll_inplace");
  in.root = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&bc, &d, PLAN, PCL_WHY_PLAN, "broadcast_2gpu_ll_inplace");
  in.root = 2;
  pcl_dispatch_decide(&in, &d);
  expect(&bc, &d, NCCL, PCL_WHY_ROOT, NULL);
  in.root = -1;
  pcl_dispatch_decide(&in, &d);
  expect(&bc, &d, NCCL, PCL_WHY_ROOT, NULL);
  in.root = 1;
  in.inplace = 0; /* a non-root passing another sendbuff: the twin, root 1 alike */
  pcl_dispatch_decide(&in, &d);
  expect(&bc, &d, PLAN, PCL_WHY_PLAN, "broadcast_2gpu_ll_outofplace");

  /* 4 MiB: only the zero-copy plan's range, and it reads the peers' buffers: registered buffers
   * get it, unregistered ones go to NCCL. */
  const struct dcase zc = {"ar 4 MiB registered",
                           AR,
                           1u << 20,
                           ncclFloat,
                           ncclSum,
                           0,
                           2,
                           2,
                           PLAN,
                           PCL_WHY_PLAN,
                           "allreduce_2gpu_zerocopy_outofplace"};
  in = base_inputs(&zc, &caps);
  in.registered = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&zc, &d, PLAN, PCL_WHY_PLAN, "allreduce_2gpu_zerocopy_outofplace");
  in.registered = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&zc, &d, NCCL, PCL_WHY_NO_PLAN, NULL);

  /* No real NCCL: what would be forwarded is an error; plans and no-ops still run. */
  in = base_inputs(&none, &caps);
  in.have_real = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&none, &d, PCL_PATH_ERROR, PCL_WHY_NO_PLAN, NULL);
  in = base_inputs(&planned, &caps);
  in.have_real = 0;
  pcl_dispatch_decide(&in, &d);
  expect(&planned, &d, PLAN, PCL_WHY_PLAN, LL1_O);
  in = base_inputs(&zero, &caps);
  in.have_real = 0;
  in.disabled = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&zero, &d, PCL_PATH_NOOP, PCL_WHY_COUNT0, NULL);
  teardown();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Broadcast and reduce: a non-root's view of in-place is not the call's, so the plan of either
 * placement runs only if the other placement gets a plan whose non-root programs are alike.
 * A lone plan, or a pair that differs (here LL against Simple), sends every rank to NCCL
 * whichever placement it sees; the shipped pairs run. */
START_TEST(test_rooted_placement) {
  static const char *const mixed[] = {"plans/extra/broadcast/2gpu_ll_inplace.json",
                                      "plans/extra/broadcast/2gpu_simple_outofplace.json",
                                      "plans/extra/reduce/2gpu_ll_outofplace.json"};
  static const char *const pairs[] = {"plans/extra/broadcast/2gpu_ll_inplace.json",
                                      "plans/extra/broadcast/2gpu_ll_outofplace.json",
                                      "plans/extra/broadcast/2gpu_simple_inplace.json",
                                      "plans/extra/broadcast/2gpu_simple_outofplace.json",
                                      "plans/extra/reduce/2gpu_ll_inplace.json",
                                      "plans/extra/reduce/2gpu_ll_outofplace.json"};
  char dir_mixed[PATH_MAX], dir_pairs[PATH_MAX];
  pcl_registry_t *rm = registry_of(mixed, 3, dir_mixed, sizeof(dir_mixed));
  pcl_registry_t *rp = registry_of(pairs, 6, dir_pairs, sizeof(dir_pairs));
  struct pcl_kernel_caps caps = caps_all();
  const struct {
    struct dcase c;
    pcl_registry_t *r;
  } t[] = {
      {{"bc 1K in-place, out-of-place is Simple", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 1, 2,
        2, NCCL, PCL_WHY_PLACEMENT, NULL},
       rm},
      {{"bc 1K out-of-place, in-place is LL", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 0, 2, 2,
        NCCL, PCL_WHY_PLACEMENT, NULL},
       rm},
      {{"bc 1M out-of-place, no in-place plan", PCL_COLL_BROADCAST, 1u << 18, ncclFloat, ncclSum, 0,
        2, 2, NCCL, PCL_WHY_PLACEMENT, NULL},
       rm},
      {{"bc 1M in-place, no in-place plan", PCL_COLL_BROADCAST, 1u << 18, ncclFloat, ncclSum, 1, 2,
        2, NCCL, PCL_WHY_PLACEMENT, NULL},
       rm},
      {{"reduce out-of-place alone", PCL_COLL_REDUCE, 256, ncclFloat, ncclSum, 0, 2, 2, NCCL,
        PCL_WHY_PLACEMENT, NULL},
       rm},
      {{"bc 2 GiB: no plan either way", PCL_COLL_BROADCAST, 1u << 29, ncclFloat, ncclSum, 0, 2, 2,
        NCCL, PCL_WHY_NO_PLAN, NULL},
       rm},
      {{"bc 1K in-place, pair", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 1, 2, 2, PLAN,
        PCL_WHY_PLAN, "broadcast_2gpu_ll_inplace"},
       rp},
      {{"bc 1K out-of-place, pair", PCL_COLL_BROADCAST, 256, ncclFloat, ncclSum, 0, 2, 2, PLAN,
        PCL_WHY_PLAN, "broadcast_2gpu_ll_outofplace"},
       rp},
      {{"bc 1M in-place, Simple pair", PCL_COLL_BROADCAST, 1u << 18, ncclFloat, ncclSum, 1, 2, 2,
        PLAN, PCL_WHY_PLAN, "broadcast_2gpu_simple_inplace"},
       rp},
      {{"reduce out-of-place, pair", PCL_COLL_REDUCE, 256, ncclFloat, ncclSum, 0, 2, 2, PLAN,
        PCL_WHY_PLAN, "reduce_2gpu_ll_outofplace"},
       rp},
  };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
    struct pcl_dispatch_inputs in = base_inputs(&t[i].c, &caps);
    struct pcl_dispatch_decision d;
    in.registry = t[i].r;
    for (int root = 0; root < 2; root++) {
      in.root = root;
      pcl_dispatch_decide(&in, &d);
      expect(&t[i].c, &d, t[i].c.path, t[i].c.why, t[i].c.plan);
    }
  }
  /* The rule itself: each shipped pair alike, LL and Simple not, a plan alike with itself. */
  const pcl_plan_t *ll_i = pcl_registry_plan(rp, 0), *ll_o = pcl_registry_plan(rp, 1);
  const pcl_plan_t *si_o = pcl_registry_plan(rp, 3);
  ck_assert(pcl_plan_nonroot_alike(ll_i, ll_o) && pcl_plan_nonroot_alike(ll_o, ll_o));
  ck_assert(!pcl_plan_nonroot_alike(ll_i, si_o) && !pcl_plan_nonroot_alike(ll_i, NULL));
  pcl_registry_destroy(rm);
  pcl_registry_destroy(rp);
  nftw(dir_mixed, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
  nftw(dir_pairs, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_parse_fallback) {
  char bad[32];
  ck_assert_uint_eq(pcl_dispatch_parse_fallback(NULL, bad, sizeof(bad)), 0);
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("", bad, sizeof(bad)), 0);
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("all", bad, sizeof(bad)), PCL_COLL_ALL_BITS);
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("ALL", bad, sizeof(bad)), PCL_COLL_ALL_BITS);
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("allreduce", bad, sizeof(bad)), PCL_COLL_BIT(AR));
  ck_assert_uint_eq(
      pcl_dispatch_parse_fallback(" AllReduce, all_gather ,reduce-scatter", bad, sizeof(bad)),
      PCL_COLL_BIT(AR) | PCL_COLL_BIT(AG) | PCL_COLL_BIT(RS));
  ck_assert_str_eq(bad, "");
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("bcast,reduce", bad, sizeof(bad)),
                    PCL_COLL_BIT(PCL_COLL_BROADCAST) | PCL_COLL_BIT(PCL_COLL_REDUCE));
  ck_assert_uint_eq(pcl_dispatch_parse_fallback("bogus,allgather,worse", bad, sizeof(bad)),
                    PCL_COLL_BIT(AG));
  ck_assert_str_eq(bad, "bogus");
}
END_TEST

START_TEST(test_msg_bytes) {
  int ok;
  ck_assert_uint_eq(pcl_dispatch_msg_bytes(AR, 10, ncclFloat, 4, &ok), 40);
  ck_assert_int_eq(ok, 1);
  ck_assert_uint_eq(pcl_dispatch_msg_bytes(AG, 10, ncclHalf, 4, &ok), 80);
  ck_assert_uint_eq(pcl_dispatch_msg_bytes(RS, 10, ncclInt64, 2, &ok), 160);
  ck_assert_uint_eq(pcl_dispatch_msg_bytes(AR, 10, (ncclDataType_t)99, 2, &ok), 0);
  ck_assert_int_eq(ok, 0);
  pcl_dispatch_msg_bytes(AR, SIZE_MAX, ncclFloat64, 2, &ok);
  ck_assert_int_eq(ok, 0);
  for (int t = 0; t < (int)ncclNumTypes; t++)
    ck_assert_uint_gt(pcl_dtype_bytes(t), 0);
}
END_TEST

/* ---- the group record ---- */

static struct pcl_group_call call(int planned, uintptr_t stream, size_t count) {
  struct pcl_group_call c;
  memset(&c, 0, sizeof(c));
  c.planned = (uint8_t)planned;
  c.a.stream = (cudaStream_t)stream;
  c.a.count = count;
  return c;
}

START_TEST(test_group_queue_order) {
  struct pcl_group_queue q = {0};
  /* Two GPUs driven by one thread (streams 1 and 2), calls in this order:
   * P(s1) P(s2) F(s1) P(s1) F(s2) P(s2) P(s3) */
  const int planned[] = {1, 1, 0, 1, 0, 1, 1};
  const uintptr_t streams[] = {1, 2, 1, 1, 2, 2, 3};
  const int after[] = {0, 0, 0, 1, 0, 1, 0};
  for (int round = 0; round < 3; round++) { /* the memory is reused across groups */
    for (int i = 0; i < 7; i++) {
      struct pcl_group_call c = call(planned[i], streams[i], (size_t)i);
      ck_assert_int_eq(pcl_group_queue_push(&q, &c), ncclSuccess);
    }
    ck_assert_int_eq(q.n, 7);
    ck_assert_int_eq(pcl_group_queue_order(&q), 5);
    for (int i = 0; i < 7; i++) {
      ck_assert_uint_eq(q.calls[i].a.count, (size_t)i); /* call order kept */
      ck_assert_int_eq(q.calls[i].after, after[i]);
    }
    pcl_group_queue_reset(&q);
    ck_assert_int_eq(q.n, 0);
  }
  /* Planned only: nothing waits for the real group end. */
  for (int i = 0; i < 100; i++) {
    struct pcl_group_call c = call(1, (uintptr_t)(i % 2), (size_t)i);
    ck_assert_int_eq(pcl_group_queue_push(&q, &c), ncclSuccess);
  }
  ck_assert_int_ge(q.cap, 100);
  ck_assert_int_eq(pcl_group_queue_order(&q), 100);
  for (int i = 0; i < 100; i++)
    ck_assert_int_eq(q.calls[i].after, 0);
  pcl_group_queue_reset(&q);
  /* Forwarded only. */
  struct pcl_group_call f = call(0, 1, 0);
  ck_assert_int_eq(pcl_group_queue_push(&q, &f), ncclSuccess);
  ck_assert_int_eq(pcl_group_queue_order(&q), 0);
  pcl_group_queue_fini(&q);
  ck_assert_ptr_null(q.calls);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_plans_search(void); /* test_plans_search.c */
TCase *dispatch_tcase_comm_layout(void);  /* test_comm_layout.c */
TCase *dispatch_tcase_comm_vote(void);    /* test_comm_vote.c */
TCase *dispatch_tcase_comm_mps(void);     /* test_comm_mps.c */

/* A tuning table for 2-rank in-place allreduce, ranks as threads with a GPU each: NCCL up to
 * 1 KiB; the opt-in two-phase plan from 1040 bytes to 64 KiB, sizes below its own range (from
 * 128 KiB + 1), so the untuned rules hold there; NCCL from 64 KiB + 16 to 1 MiB. */
static const char tuned_text[] =
    "{\"planccl_tune\": 1, \"identity\": {\"gpu\": \"G\", \"gpus\": 2, \"link\": \"nvlink\","
    " \"driver\": \"d\", \"cuda\": \"c\", \"planccl\": \"p\", \"nccl\": \"n\","
    " \"plans_digest\": \"1\"}, \"entries\": [{\"collective\": \"allreduce\", \"world\": 2,"
    " \"ranks_per_node\": 2, \"ranks_per_gpu\": 1, \"process_model\": \"threads\","
    " \"inplace\": true, \"registered\": false, \"ranges\": ["
    "{\"min\": 16, \"max\": 1024, \"path\": \"nccl\", \"us\": 3},"
    "{\"min\": 1040, \"max\": 65536, \"path\": \"allreduce_2gpu_ll2_inplace\", \"us\": 4},"
    "{\"min\": 65552, \"max\": 1048576, \"path\": \"nccl\", \"us\": 9}]}]}";

/* The call's path with the tuning table, for a shape of ranks as threads with a GPU each. */
static void decide_tuned(const struct dcase *c, const struct pcl_kernel_caps *caps, int procs,
                         int ranks_per_gpu, pcl_path_t path, pcl_why_t why, const char *plan) {
  struct pcl_dispatch_inputs in = base_inputs(c, caps);
  in.ranks_per_gpu = ranks_per_gpu;
  in.procs = procs;
  struct pcl_dispatch_decision d;
  pcl_dispatch_decide(&in, &d);
  expect(c, &d, path, why, plan);
}

/* The tuning table decides where it has the call's whole shape and size and the plan it names
 * can take the size; elsewhere the untuned rules hold. A call it sends to NCCL says so. */
START_TEST(test_decide_tuned) {
  setup();
  pcl_tune_t *t = NULL;
  char err[256];
  ck_assert_int_eq(
      pcl_tune_load_buffer("t.json", tuned_text, strlen(tuned_text), &t, err, sizeof(err)),
      ncclSuccess);
  pcl_registry_set_tuning(reg, t, 1);
  struct pcl_kernel_caps caps = caps_all();
  const int threads = PCL_TUNE_PROCS_THREADS, procs = PCL_TUNE_PROCS_PROCESSES;
  const struct dcase small = {.what = "256 B",
                              .coll = AR,
                              .count = 64,
                              .dtype = ncclFloat,
                              .inplace = 1,
                              .nranks = 2,
                              .rpn = 2};
  const struct dcase mid = {.what = "4 KiB",
                            .coll = AR,
                            .count = 1024,
                            .dtype = ncclFloat,
                            .inplace = 1,
                            .nranks = 2,
                            .rpn = 2};
  const struct dcase big = {.what = "256 KiB",
                            .coll = AR,
                            .count = 65536,
                            .dtype = ncclFloat,
                            .inplace = 1,
                            .nranks = 2,
                            .rpn = 2};
  const struct dcase big_out = {.what = "256 KiB out of place",
                                .coll = AR,
                                .count = 65536,
                                .dtype = ncclFloat,
                                .inplace = 0,
                                .nranks = 2,
                                .rpn = 2};
  decide_tuned(&small, &caps, threads, 1, NCCL, PCL_WHY_TUNED_NCCL, NULL);
  decide_tuned(&mid, &caps, threads, 1, PLAN, PCL_WHY_PLAN, LL1_I); /* ll2 cannot take 4 KiB */
  decide_tuned(&big, &caps, threads, 1, NCCL, PCL_WHY_TUNED_NCCL, NULL);
  /* Other shapes: processes, ranks sharing a GPU, out of place: untuned. */
  decide_tuned(&small, &caps, procs, 1, PLAN, PCL_WHY_PLAN, LL1S_I);
  decide_tuned(&small, &caps, threads, 2, PLAN, PCL_WHY_PLAN, LL1S_I);
  decide_tuned(&big, &caps, procs, 1, PLAN, PCL_WHY_PLAN, "allreduce_2gpu_ll2_inplace");
  decide_tuned(&big_out, &caps, threads, 1, PLAN, PCL_WHY_PLAN, "allreduce_2gpu_ll2_outofplace");
  /* Untuned again: the table's sizes take the default plans. */
  pcl_registry_set_tuning(reg, NULL, 0);
  decide_tuned(&small, &caps, threads, 1, PLAN, PCL_WHY_PLAN, LL1S_I);
  decide_tuned(&big, &caps, threads, 1, PLAN, PCL_WHY_PLAN, "allreduce_2gpu_ll2_inplace");
  teardown();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* 2-rank out-of-place allreduce, ranks as threads with a GPU each, measured unregistered and
 * registered: the two entries disagree at 16 B-1 KiB (NCCL; the small LL plan registered) and
 * 2 KiB+16-32 KiB (the LL plan; NCCL registered), agree at 32 KiB+16-64 KiB, and the registered
 * entry alone sends 128 KiB+16 to NCCL, where unregistered calls have no plan anyway. */
static const char tuned_reg_text[] =
    "{\"planccl_tune\": 1, \"identity\": {\"gpu\": \"G\", \"gpus\": 2, \"link\": \"nvlink\","
    " \"driver\": \"d\", \"cuda\": \"c\", \"planccl\": \"p\", \"nccl\": \"n\","
    " \"plans_digest\": \"1\"}, \"entries\": ["
    "{\"collective\": \"allreduce\", \"world\": 2, \"ranks_per_node\": 2, \"ranks_per_gpu\": 1,"
    " \"process_model\": \"threads\", \"inplace\": false, \"registered\": false, \"ranges\": ["
    "{\"min\": 16, \"max\": 1024, \"path\": \"nccl\", \"us\": 3},"
    "{\"min\": 2064, \"max\": 32768, \"path\": \"" LL1_O "\", \"us\": 4},"
    "{\"min\": 32784, \"max\": 65536, \"path\": \"" LL1L_O "\", \"us\": 5}]},"
    "{\"collective\": \"allreduce\", \"world\": 2, \"ranks_per_node\": 2, \"ranks_per_gpu\": 1,"
    " \"process_model\": \"threads\", \"inplace\": false, \"registered\": true, \"ranges\": ["
    "{\"min\": 16, \"max\": 1024, \"path\": \"" LL1S_O "\", \"us\": 2},"
    "{\"min\": 2064, \"max\": 32768, \"path\": \"nccl\", \"us\": 3},"
    "{\"min\": 32784, \"max\": 65536, \"path\": \"" LL1L_O "\", \"us\": 5},"
    "{\"min\": 131088, \"max\": 131088, \"path\": \"nccl\", \"us\": 6}]}]}";

/* One size, unregistered then registered (ranks as threads, a GPU each): each decision, and
 * whether registration matters, which must not depend on the registered flag it is given. */
static void decide_reg(size_t count, int procs, pcl_path_t upath, pcl_why_t uwhy, const char *uplan,
                       pcl_path_t rpath, pcl_why_t rwhy, const char *rplan, int matters) {
  char what[64];
  snprintf(what, sizeof(what), "%zu B out of place", count * sizeof(float));
  const struct dcase c = {.what = what,
                          .coll = AR,
                          .count = count,
                          .dtype = ncclFloat,
                          .op = ncclSum,
                          .nranks = 2,
                          .rpn = 2};
  struct pcl_kernel_caps caps = caps_all();
  struct pcl_dispatch_inputs in = base_inputs(&c, &caps);
  struct pcl_dispatch_decision d;
  in.ranks_per_gpu = 1;
  in.procs = procs;
  pcl_dispatch_decide(&in, &d);
  expect(&c, &d, upath, uwhy, uplan);
  ck_assert_msg(pcl_dispatch_registration_matters(&in) == matters, "%s: registration %s", what,
                matters ? "should matter" : "should not matter");
  in.registered = 1;
  pcl_dispatch_decide(&in, &d);
  expect(&c, &d, rpath, rwhy, rplan);
  ck_assert_int_eq(pcl_dispatch_registration_matters(&in), matters);
}

/* The tuning file's entries for registered buffers: a call on registered buffers takes them, and
 * registration matters (the dispatcher then looks the call's registration up) exactly where the
 * registered decision runs a zero-copy plan or another path or plan than the unregistered one. */
START_TEST(test_decide_tuned_registered) {
  setup();
  pcl_tune_t *t = NULL;
  char err[256];
  ck_assert_int_eq(
      pcl_tune_load_buffer("t.json", tuned_reg_text, strlen(tuned_reg_text), &t, err, sizeof(err)),
      ncclSuccess);
  pcl_registry_set_tuning(reg, t, 1);
  const int threads = PCL_TUNE_PROCS_THREADS, procs = PCL_TUNE_PROCS_PROCESSES;
  const pcl_why_t P = PCL_WHY_PLAN, TN = PCL_WHY_TUNED_NCCL, NP = PCL_WHY_NO_PLAN;
  const char *zc = "allreduce_2gpu_zerocopy_outofplace";
  /* The entries disagree: NCCL against a plan, a plan against NCCL. */
  decide_reg(64, threads, NCCL, TN, NULL, PLAN, P, LL1S_O, 1);
  decide_reg(1024, threads, PLAN, P, LL1_O, NCCL, TN, NULL, 1);
  /* They agree: nothing to register. */
  decide_reg(16384, threads, PLAN, P, LL1L_O, PLAN, P, LL1L_O, 0);
  /* Forwarded either way, for another reason: nothing to register either. */
  decide_reg(32772, threads, NCCL, NP, NULL, NCCL, TN, NULL, 0);
  /* Sizes the file lacks: the untuned rules, alike but for the zero-copy plan. */
  decide_reg(65536, threads, PLAN, P, LL2_O, PLAN, P, LL2_O, 0);
  decide_reg(1u << 20, threads, NCCL, NP, NULL, PLAN, P, zc, 1);
  /* A shape the file lacks (processes): untuned. */
  decide_reg(64, procs, PLAN, P, LL1S_O, PLAN, P, LL1S_O, 0);
  decide_reg(1024, procs, PLAN, P, LL1_O, PLAN, P, LL1_O, 0);
  /* Disabled: forwarded whatever the buffers. */
  const struct dcase big = {.what = "4 MiB disabled",
                            .coll = AR,
                            .count = 1u << 20,
                            .dtype = ncclFloat,
                            .nranks = 2,
                            .rpn = 2};
  struct pcl_kernel_caps caps = caps_all();
  struct pcl_dispatch_inputs in = base_inputs(&big, &caps);
  in.disabled = 1;
  ck_assert_int_eq(pcl_dispatch_registration_matters(&in), 0);
  /* Untuned: only the zero-copy plan makes registration matter. */
  pcl_registry_set_tuning(reg, NULL, 0);
  decide_reg(64, threads, PLAN, P, LL1S_O, PLAN, P, LL1S_O, 0);
  decide_reg(1024, threads, PLAN, P, LL1_O, PLAN, P, LL1_O, 0);
  decide_reg(1u << 20, threads, NCCL, NP, NULL, PLAN, P, zc, 1);
  teardown();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("dispatch");
  TCase *tc = tcase_create("decide");
  tcase_add_test(tc, test_decide_table);
  tcase_add_test(tc, test_decide_overrides);
  tcase_add_test(tc, test_decide_tuned);
  tcase_add_test(tc, test_decide_tuned_registered);
  tcase_add_test(tc, test_rooted_placement);
  tcase_add_test(tc, test_parse_fallback);
  tcase_add_test(tc, test_msg_bytes);
  tcase_add_test(tc, test_group_queue_order);
  suite_add_tcase(s, tc);
  suite_add_tcase(s, dispatch_tcase_plans_search());
  suite_add_tcase(s, dispatch_tcase_comm_layout());
  suite_add_tcase(s, dispatch_tcase_comm_vote());
  suite_add_tcase(s, dispatch_tcase_comm_mps());
  return pcl_test_run_suite(s);
}
