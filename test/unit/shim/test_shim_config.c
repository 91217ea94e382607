/* SPDX-License-Identifier: MIT
 * The per-call-config collectives (nccl*Config, 2.31) through the dispatcher, against the fake:
 * config == NULL is the plain call (the same PLANCCL_STATS row, the real plain function when
 * forwarded), a config goes to the fake's *Config function with the caller's pointer and is
 * counted under "per-call config"; a real NCCL lacking the *Config function refuses only that. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_compat_int.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)
#define CFG ((const pcl_coll_config_t *)(uintptr_t)0xc0f1)
#define CONFIG_ROUTE "nccl (per-call config)"

/* One collective called three ways: plain, with config NULL, with CFG (rank 1 of 4, root 0). */
struct coll_case {
  const char *plain, *config, *stats_name;
  ncclResult_t (*call)(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config);
  int cfg_arg; /* index of the config among the fake's recorded arguments */
};

#define CALL(fn, ...)                                                                              \
  (with_config ? fn##Config(__VA_ARGS__, comm, STREAM, cfg) : fn(__VA_ARGS__, comm, STREAM))
static ncclResult_t c_allreduce(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclAllReduce, SBUF, RBUF, 64, ncclFloat, ncclSum);
}
static ncclResult_t c_broadcast(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclBroadcast, SBUF, RBUF, 64, ncclFloat, 0);
}
static ncclResult_t c_reduce(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclReduce, SBUF, RBUF, 64, ncclFloat, ncclSum, 0);
}
static ncclResult_t c_allgather(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclAllGather, SBUF, RBUF, 64, ncclFloat);
}
static ncclResult_t c_reducescatter(ncclComm_t comm, const pcl_coll_config_t *cfg,
                                    int with_config) {
  return CALL(ncclReduceScatter, SBUF, RBUF, 64, ncclFloat, ncclSum);
}
static ncclResult_t c_alltoall(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclAlltoAll, SBUF, RBUF, 64, ncclFloat);
}
static ncclResult_t c_gather(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclGather, SBUF, RBUF, 64, ncclFloat, 0);
}
static ncclResult_t c_scatter(ncclComm_t comm, const pcl_coll_config_t *cfg, int with_config) {
  return CALL(ncclScatter, SBUF, RBUF, 64, ncclFloat, 0);
}

static const struct coll_case cases[] = {
    {"ncclAllReduce", "ncclAllReduceConfig", "AllReduce", c_allreduce, 7},
    {"ncclBroadcast", "ncclBroadcastConfig", "Broadcast", c_broadcast, 7},
    {"ncclReduce", "ncclReduceConfig", "Reduce", c_reduce, 8},
    {"ncclAllGather", "ncclAllGatherConfig", "AllGather", c_allgather, 6},
    {"ncclReduceScatter", "ncclReduceScatterConfig", "ReduceScatter", c_reducescatter, 7},
    {"ncclAlltoAll", "ncclAlltoAllConfig", "AlltoAll", c_alltoall, 6},
    {"ncclGather", "ncclGatherConfig", "Gather", c_gather, 7},
    {"ncclScatter", "ncclScatterConfig", "Scatter", c_scatter, 7},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static char *stats_file(char **dir) {
  *dir = shim_test_tmpdir();
  char *path = malloc(512);
  snprintf(path, 512, "%s/stats.txt", *dir);
  setenv("PLANCCL_STATS", "1", 1);
  return path;
}

/* Each of the eight: config NULL lands in the plain call's row and reaches what the plain call
 * reaches; a config reaches the fake's *Config with the caller's pointer and the real comm, and is
 * counted under its own reason, whatever path the plain call takes on this machine. */
START_TEST(test_config_null_is_plain_call) {
  char *dir, *stats = stats_file(&dir);
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  for (int i = 0; i < NCASES; i++) {
    const struct coll_case *k = &cases[i];
    int plain0 = shim_test_count(st, k->plain), config0 = shim_test_count(st, k->config);
    ck_assert_int_eq(k->call(comm, NULL, 0), ncclSuccess);
    int plain_reached = shim_test_count(st, k->plain) - plain0;
    ck_assert_int_eq(k->call(comm, NULL, 1), ncclSuccess);
    /* The NULL config reached exactly what the plain call reached, never the *Config function. */
    ck_assert_int_eq(shim_test_count(st, k->plain) - plain0, 2 * plain_reached);
    ck_assert_int_eq(shim_test_count(st, k->config), config0);
    ck_assert_int_eq(k->call(comm, CFG, 1), ncclSuccess);
    int j = shim_test_last(st, k->config);
    ck_assert_msg(j >= 0 && shim_test_count(st, k->config) == config0 + 1, "%s not forwarded",
                  k->config);
    ck_assert_uint_eq(st->calls[j].a[k->cfg_arg], U64(CFG));
    ck_assert_uint_eq(st->calls[j].a[k->cfg_arg - 2], U64(real));
    ck_assert_uint_eq(st->calls[j].a[0], U64(SBUF));
    ck_assert_int_eq(shim_test_count(st, k->plain) - plain0, 2 * plain_reached);
  }
  /* Return codes of the *Config function come back; count 0 with a config is forwarded too (what
   * the config asks of an empty call is the real NCCL's to say). */
  shim_test_set_result(st, "ncclAlltoAllConfig", ncclInternalError);
  ck_assert_int_eq(ncclAlltoAllConfig(SBUF, RBUF, 1, ncclFloat, comm, STREAM, CFG),
                   ncclInternalError);
  int n0 = shim_test_count(st, "ncclAllReduceConfig");
  ck_assert_int_eq(ncclAllReduceConfig(NULL, NULL, 0, ncclFloat, ncclSum, comm, STREAM, CFG),
                   ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclAllReduceConfig"), n0 + 1);
  /* Arguments are checked as for the plain call, before anything is forwarded. */
  int before = st->ncalls;
  ck_assert_int_eq(ncclBroadcastConfig(SBUF, RBUF, 1, ncclFloat, 4, comm, STREAM, CFG),
                   ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 1, ncclNumTypes, ncclSum, comm, STREAM, CFG),
                   ncclInvalidArgument);
  ck_assert_int_eq(st->ncalls, before);
  ck_assert_int_eq(st->foreign_comms, 0);
  shim_test_destroy_with_stats(comm, stats);
  for (int i = 0; i < NCASES; i++) {
    const char *coll = cases[i].stats_name;
    long cfg_calls = shim_test_stats_calls(stats, coll, CONFIG_ROUTE);
    long want_cfg = 1 + (strcmp(coll, "AlltoAll") == 0 || strcmp(coll, "AllReduce") == 0);
    ck_assert_msg(cfg_calls == want_cfg, "%s: %ld calls under per-call config", coll, cfg_calls);
    /* One more row: the plain path, with the plain call and the NULL config's call. */
    ck_assert_msg(shim_test_stats_rows(stats, coll) == 2, "%s: %d rows", coll,
                  shim_test_stats_rows(stats, coll));
  }
  shim_test_rmtree(dir);
  free(dir);
  free(stats);
}
END_TEST

/* Inside a group a config call is forwarded at once, like every forwarded collective (and noted,
 * so that planned calls later on its stream follow the real group end); a NULL config inside a
 * group is the plain call there too. */
START_TEST(test_config_in_group) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  int n = st->ncalls;
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 5, ncclFloat, ncclSum, comm, STREAM, CFG),
                   ncclSuccess);
  ck_assert_int_eq(shim_test_last(st, "ncclAllReduceConfig"), n);
  ck_assert_int_eq(ncclReduceScatterConfig(SBUF, RBUF, 5, ncclFloat, ncclSum, comm, STREAM, NULL),
                   ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclReduceScatterConfig"), 0);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_gt(shim_test_last(st, "ncclGroupEnd"), n);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* A real NCCL without ncclAllReduceConfig (the partial fake): a config is refused with
 * ncclInvalidUsage and one WARN naming the function; config NULL is the plain call and works. */
START_TEST(test_config_missing_function) {
  char *dir, *stats = stats_file(&dir);
  char log[512];
  snprintf(log, sizeof(log), "%s/log.txt", dir);
  setenv("PLANCCL_DEBUG_FILE", log, 1);
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL_PARTIAL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  int w0 = shim_test_count_lines(log, "PLANCCL WARN", NULL);
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, NULL),
                   ncclSuccess);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), w0);
  int before = st->ncalls;
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, CFG),
                   ncclInvalidUsage);
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, CFG),
                   ncclInvalidUsage);
  ck_assert_int_eq(st->ncalls, before); /* nothing reached the fake */
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), w0 + 1);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "ncclAllReduceConfig: the real NCCL"),
                   1);
  /* The *Config functions it has are forwarded. */
  ck_assert_int_eq(ncclBroadcastConfig(SBUF, RBUF, 8, ncclFloat, 0, comm, STREAM, CFG),
                   ncclSuccess);
  ck_assert_int_ge(shim_test_last(st, "ncclBroadcastConfig"), 0);
  shim_test_destroy_with_stats(comm, stats);
  ck_assert_int_eq(shim_test_stats_calls(stats, "AllReduce", CONFIG_ROUTE), 2);
  shim_test_rmtree(dir);
  free(dir);
  free(stats);
}
END_TEST

TCase *shim_tcase_config(void) {
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, test_config_null_is_plain_call);
  tcase_add_test(tc, test_config_in_group);
  tcase_add_test(tc, test_config_missing_function);
  return tc;
}
