/* SPDX-License-Identifier: MIT
 * planccl over a real NCCL of each API level (the fake built with NCCL 2.28.9's, 2.30.7's and
 * 2.32's functions): every function newer than the level returns ncclInvalidUsage with one WARN
 * naming it and reaches nothing, every function of the level is forwarded. Which release added
 * which function is the loader's own table (PCL_NCCL_FNS_2_xx, nccl_compat_int.h); this file
 * only knows how to call each. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_compat_int.h"
#include "nccl_device_int.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)
#define WIN ((ncclWindow_t)(uintptr_t)0x3180)
#define CFG ((const pcl_coll_config_t *)(uintptr_t)0xc0f1)
#define PTR(type, v) ((type *)(uintptr_t)(v))

/* ncclTeam_t results: a refused team has rank -1. */
static ncclResult_t team_result(ncclTeam_t t) {
  return t.rank < 0 ? ncclInvalidUsage : ncclSuccess;
}

/* One call of each function newer than 2.28, with arguments the fake accepts. */
typedef ncclResult_t (*thunk_fn)(ncclComm_t comm);
#define THUNK(fn, ...)                                                                             \
  static ncclResult_t t_##fn(ncclComm_t comm) {                                                    \
    (void)comm;                                                                                    \
    return fn(__VA_ARGS__);                                                                        \
  }

static ncclResult_t t_ncclCommSuspend(ncclComm_t comm) {
  ncclResult_t r = ncclCommSuspend(comm, 1);
  return r == ncclSuccess ? ncclCommResume(comm) : r; /* later calls need it running */
}
static ncclResult_t t_ncclCommGrow(ncclComm_t comm) {
  ncclUniqueId id;
  ncclComm_t grown = NULL;
  memset(&id, 0, sizeof(id));
  ncclResult_t r = ncclCommGrow(comm, 4, &id, -1, &grown, NULL);
  if (grown != NULL)
    ck_assert_int_eq(ncclCommDestroy(grown), ncclSuccess);
  return r;
}
static ncclResult_t t_ncclParamDumpAll(ncclComm_t comm) {
  (void)comm;
  ncclParamDumpAll();
  return ncclSuccess; /* returns nothing: judged by what reached the fake */
}
static ncclResult_t t_ncclTeamCft(ncclComm_t comm) {
  return team_result(ncclTeamCft(comm, 0));
}
static ncclResult_t t_ncclTeamCftMultimem(ncclComm_t comm) {
  return team_result(ncclTeamCftMultimem(comm));
}

static uint64_t u64_out;
static void *ptr_out;
static ncclUniqueId id_out;
static pcl_cft_le_id_t le_out;
static size_t off_out;
static const char *str_out;
static const char **keys_out;
static int len_out;
static char buf_out[8];
static pcl_param_handle_t param_out;
static const ncclTeam_t team = {2, 0, 1};
static const pcl_multimem_handle_t mm = {(void *)(uintptr_t)0x70000};

THUNK(ncclCommResume, comm)
THUNK(ncclCommMemStats, comm, (pcl_comm_mem_stat_t)0, &u64_out)
THUNK(ncclCommGetUniqueId, comm, &id_out)
THUNK(ncclCommQueryProperties, comm, PTR(pcl_comm_properties_t, 0x9090))
THUNK(ncclWinGetUserPtr, comm, WIN, &ptr_out)
THUNK(ncclPutSignal, SBUF, 1, ncclFloat, 1, WIN, 0, 0, 0, 0, comm, STREAM)
THUNK(ncclSignal, 1, 0, 0, 0, comm, STREAM)
THUNK(ncclWaitSignal, 1, PTR(pcl_wait_signal_desc_t, 0x5160), comm, STREAM)
THUNK(ncclGetPeerDevicePointer, WIN, 0, 1, &ptr_out)
THUNK(ncclGetLsaDevicePointer, WIN, 0, 1, &ptr_out)
THUNK(ncclGetLsaMultimemDevicePointer, WIN, 0, &ptr_out)
THUNK(ncclGetMultimemDevicePointer, WIN, 0, mm, &ptr_out)
THUNK(ncclGinOutboxCreateRequirement, 1, 10, PTR(pcl_gin_outbox_handle_t, 0x1e),
      PTR(ncclDevResourceRequirements_t, 0x1b))
THUNK(ncclGinInboxA2ACreateRequirement, team, 1, 10, PTR(pcl_gin_inbox_a2a_handle_t, 0x1f),
      PTR(ncclDevResourceRequirements_t, 0x1b))
THUNK(ncclParamBind, &param_out, "NCCL_FAKE_PARAM")
THUNK(ncclParamGet, PTR(struct pcl_param_handle, 0x9a), buf_out, 8, &len_out)
THUNK(ncclParamGetI8, PTR(struct pcl_param_handle, 0x9a), (int8_t *)&u64_out)
THUNK(ncclParamGetI16, PTR(struct pcl_param_handle, 0x9a), (int16_t *)&u64_out)
THUNK(ncclParamGetI32, PTR(struct pcl_param_handle, 0x9a), (int32_t *)&u64_out)
THUNK(ncclParamGetI64, PTR(struct pcl_param_handle, 0x9a), (int64_t *)&u64_out)
THUNK(ncclParamGetU8, PTR(struct pcl_param_handle, 0x9a), (uint8_t *)&u64_out)
THUNK(ncclParamGetU16, PTR(struct pcl_param_handle, 0x9a), (uint16_t *)&u64_out)
THUNK(ncclParamGetU32, PTR(struct pcl_param_handle, 0x9a), (uint32_t *)&u64_out)
THUNK(ncclParamGetU64, PTR(struct pcl_param_handle, 0x9a), &u64_out)
THUNK(ncclParamGetStr, PTR(struct pcl_param_handle, 0x9a), &str_out)
THUNK(ncclParamGetParameter, "NCCL_FAKE_PARAM", &str_out, &len_out)
THUNK(ncclParamGetAllParameterKeys, &keys_out, &len_out)
THUNK(ncclAllReduceConfig, SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, CFG)
THUNK(ncclBroadcastConfig, SBUF, RBUF, 8, ncclFloat, 0, comm, STREAM, CFG)
THUNK(ncclReduceConfig, SBUF, RBUF, 8, ncclFloat, ncclSum, 0, comm, STREAM, CFG)
THUNK(ncclAllGatherConfig, SBUF, RBUF, 8, ncclFloat, comm, STREAM, CFG)
THUNK(ncclReduceScatterConfig, SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, CFG)
THUNK(ncclAlltoAllConfig, SBUF, RBUF, 8, ncclFloat, comm, STREAM, CFG)
THUNK(ncclGatherConfig, SBUF, RBUF, 8, ncclFloat, 0, comm, STREAM, CFG)
THUNK(ncclScatterConfig, SBUF, RBUF, 8, ncclFloat, 0, comm, STREAM, CFG)
THUNK(ncclGetPeerDeviceLeInfo, WIN, 0, 1, &le_out, &off_out)
THUNK(ncclGetMultimemDeviceLeInfo, WIN, 0, &le_out, &off_out)
THUNK(ncclGetCftDeviceLeInfo, WIN, 0, 1, team, &le_out, &off_out)
THUNK(ncclSetEncryption, PTR(pcl_encryption_config_t, 0xe7c))

static const struct {
  const char *name;
  thunk_fn call;
} thunks[] = {
#define THUNK_ROW(fn) {#fn, t_##fn},
    PCL_NCCL_FNS_2_29(THUNK_ROW) PCL_NCCL_FNS_2_30(THUNK_ROW) PCL_NCCL_FNS_2_31(THUNK_ROW)
        PCL_NCCL_FNS_2_32(THUNK_ROW)
#undef THUNK_ROW
};

/* The loader's table: each newer function with the first release exporting it. */
static const struct {
  const char *name;
  int since;
} newer[] = {
#define ROW_2_29(fn) {#fn, PCL_NCCL_SINCE_2_29},
#define ROW_2_30(fn) {#fn, PCL_NCCL_SINCE_2_30},
#define ROW_2_31(fn) {#fn, PCL_NCCL_SINCE_2_31},
#define ROW_2_32(fn) {#fn, PCL_NCCL_SINCE_2_32},
    PCL_NCCL_FNS_2_29(ROW_2_29) PCL_NCCL_FNS_2_30(ROW_2_30) PCL_NCCL_FNS_2_31(ROW_2_31)
        PCL_NCCL_FNS_2_32(ROW_2_32)
#undef ROW_2_29
#undef ROW_2_30
#undef ROW_2_31
#undef ROW_2_32
};

#define NNEWER ((int)(sizeof(newer) / sizeof(newer[0])))

static thunk_fn thunk_of(const char *name) {
  for (size_t i = 0; i < sizeof(thunks) / sizeof(thunks[0]); i++)
    if (strcmp(thunks[i].name, name) == 0)
      return thunks[i].call;
  return NULL;
}

/* Loads the fake of `var`, which has the functions of `level` and says `version`, and checks every
 * newer function against it. */
static void check_level(const char *var, int level, int version) {
  char log[512];
  char *dir = shim_test_log_dir(log, sizeof(log));
  struct fake_state *st = shim_test_use_fake_version(var, version);
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  /* Every 2.28 function is there: no WARN at load; the classic calls forward. */
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), 0);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclAllReduce"), 1);
  int refused = 0;
  for (int i = 0; i < NNEWER; i++) {
    const char *name = newer[i].name;
    thunk_fn call = thunk_of(name);
    ck_assert_msg(call != NULL, "no call of %s in this test", name);
    const int has = newer[i].since <= level;
    int n0 = shim_test_count(st, name);
    ncclResult_t r1 = call(comm), r2 = call(comm);
    char warn[96];
    snprintf(warn, sizeof(warn), "%s: the real NCCL", name);
    if (has) {
      ck_assert_msg(r1 == ncclSuccess && r2 == ncclSuccess, "%s: %d %d at level %d", name, r1, r2,
                    level);
      ck_assert_msg(shim_test_count(st, name) == n0 + 2, "%s was not forwarded", name);
      continue;
    }
    refused++;
    ck_assert_msg(shim_test_count(st, name) == n0, "%s reached a library without it", name);
    if (strcmp(name, "ncclParamDumpAll") != 0)
      ck_assert_msg(r1 == ncclInvalidUsage && r2 == ncclInvalidUsage, "%s: %d %d", name, r1, r2);
    ck_assert_msg(shim_test_count_lines(log, "PLANCCL WARN", warn) == 1, "%s: %d WARN lines", name,
                  shim_test_count_lines(log, "PLANCCL WARN", warn));
  }
  /* The refusals were all the WARNs, but for the one ncclSetEncryption gives where it works
   * (planccl's own sockets are not encrypted). */
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "does not export it"), refused);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL),
                   refused + (level >= PCL_NCCL_SINCE_2_32));
  /* A NULL config is the plain call, whatever the level. */
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM, NULL),
                   ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclAllReduce"), 2);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(st->live_comms, 0);
  shim_test_rmtree(dir);
  free(dir);
}

START_TEST(test_level_2_28) {
  check_level("PCL_FAKE_NCCL_2_28", 22809, 22809);
}
END_TEST

START_TEST(test_level_2_30) {
  check_level("PCL_FAKE_NCCL_2_30", 23007, 23007);
}
END_TEST

START_TEST(test_level_2_32) {
  check_level("PCL_FAKE_NCCL", PCL_NCCL_SINCE_2_32, FAKE_VERSION);
}
END_TEST

TCase *shim_tcase_levels(void) {
  TCase *tc = tcase_create("levels");
  tcase_add_test(tc, test_level_2_28);
  tcase_add_test(tc, test_level_2_30);
  tcase_add_test(tc, test_level_2_32);
  return tc;
}
