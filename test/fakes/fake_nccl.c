/* SPDX-License-Identifier: MIT
 * A recording fake of libnccl.so.2 for GPU-free tests of planccl's forwarding. It exports NCCL
 * 2.32's names (FAKE_LEVEL: an older release's only; FAKE_PARTIAL: less a few, see below), records
 * every call (name + arguments) in fake_nccl_state(), returns the codes a test chose, and, like the
 * real library, calls some of its own public functions internally (ncclBcast calls ncclBroadcast,
 * init calls ncclGetVersion, ncclCommInitAll calls ncclGetUniqueId, group and init): with
 * RTLD_DEEPBIND those calls must stay inside the fake. */
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fake_nccl.h"
#include "nccl_compat_int.h"
#include "nccl_device_int.h"

#define EXPORT __attribute__((visibility("default")))

/* FAKE_LEVEL: the real release whose function set this build exports (its version is then what
 * ncclGetVersion says); by default all of 2.32's, under FAKE_VERSION. */
#ifdef FAKE_LEVEL
#define FAKE_REPORTED_VERSION FAKE_LEVEL
#else
#define FAKE_LEVEL PCL_NCCL_SINCE_2_32
#define FAKE_REPORTED_VERSION FAKE_VERSION
#endif

static struct fake_state st;

EXPORT struct fake_state *fake_nccl_state(void) {
  return &st;
}

#define U(x) ((uint64_t)(uintptr_t)(x))
#define I(x) ((uint64_t)(int64_t)(x))

static void rec(const char *name, int n, const uint64_t *a) {
  if (st.ncalls >= FAKE_MAX_CALLS)
    return;
  struct fake_call *c = &st.calls[st.ncalls++];
  strncpy(c->name, name, sizeof(c->name) - 1);
  for (int i = 0; i < n && i < FAKE_MAX_ARGS; i++)
    c->a[i] = a[i];
}
#define REC(name, ...)                                                                             \
  do {                                                                                             \
    uint64_t a_[] = {__VA_ARGS__};                                                                 \
    rec(name, (int)(sizeof(a_) / sizeof(a_[0])), a_);                                              \
  } while (0)

static ncclResult_t result_of(const char *name) {
  for (int i = 0; i < st.nresults; i++)
    if (strcmp(st.results[i].name, name) == 0)
      return (ncclResult_t)st.results[i].result;
  return ncclSuccess;
}

/* ---- fake communicators: a list of live ones, checked without dereferencing ---- */

struct fake_comm {
  int rank, nranks, dev;
};

#define MAX_COMMS 4096
static struct fake_comm *comms[MAX_COMMS];

static struct fake_comm *comm_new(int rank, int nranks) {
  struct fake_comm *c = calloc(1, sizeof(*c));
  c->rank = rank;
  c->nranks = nranks;
  c->dev = rank;
  for (int i = 0; i < MAX_COMMS; i++)
    if (comms[i] == NULL) {
      comms[i] = c;
      break;
    }
  st.last_comm = c;
  st.live_comms++;
  return c;
}

static int comm_index(ncclComm_t p) {
  for (int i = 0; i < MAX_COMMS; i++)
    if (comms[i] != NULL && (void *)comms[i] == (void *)p)
      return i;
  return -1;
}

static struct fake_comm *comm_get(ncclComm_t p) {
  int i = comm_index(p);
  if (i < 0) {
    st.foreign_comms++;
    return NULL;
  }
  return comms[i];
}

#define CHECK_COMM(comm)                                                                           \
  do {                                                                                             \
    if (comm_get(comm) == NULL)                                                                    \
      return ncclInvalidArgument;                                                                  \
  } while (0)

/* Inits inside a fake group are written to the caller's slot at the outermost group end. */
static struct {
  ncclComm_t *slot;
  struct fake_comm *comm;
} pending[MAX_COMMS];
static int npending;

static ncclResult_t init_comm(const char *name, ncclComm_t *out, int nranks, int rank) {
  ncclResult_t r = result_of(name);
  if (r != ncclSuccess && r != ncclInProgress)
    return r;
  int v;
  ncclGetVersion(&v); /* through the PLT, like NCCL's fillInfo */
  struct fake_comm *c = comm_new(rank, nranks);
  if (st.group_depth > 0) {
    pending[npending].slot = out;
    pending[npending++].comm = c;
  } else {
    *out = (ncclComm_t)c;
  }
  return r;
}

/* ---- version, ids, errors ---- */

EXPORT ncclResult_t ncclGetVersion(int *version) {
  REC("ncclGetVersion", U(version));
  *version = FAKE_REPORTED_VERSION;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  REC("ncclGetUniqueId", U(id));
  memset(id, 0, sizeof(*id));
  memset(id->internal, FAKE_ID_BYTE, 40);
  return result_of("ncclGetUniqueId");
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
  REC("ncclGetErrorString", I(r));
  return "fake error string";
}

EXPORT const char *ncclGetLastError(ncclComm_t comm) {
  REC("ncclGetLastError", U(comm));
  return st.last_error;
}

EXPORT void ncclResetDebugInitInternal(void) {
  REC("ncclResetDebugInitInternal", 0);
}

#ifdef ncclResetDebugInit /* an empty macro in nccl.h >= 2.30.3 without NCCL_OS_LINUX */
#undef ncclResetDebugInit
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
EXPORT void ncclResetDebugInit(void) {
  REC("ncclResetDebugInit", 0);
}
#pragma GCC diagnostic pop

/* ---- lifecycle ---- */

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  uint64_t id0;
  memcpy(&id0, id.internal, 8);
  uint64_t id40;
  memcpy(&id40, id.internal + 40, 8);
  REC("ncclCommInitRank", U(comm), I(nranks), id0, I(rank), id40);
  return init_comm("ncclCommInitRank", comm, nranks, rank);
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config) {
  uint64_t id0;
  memcpy(&id0, id.internal, 8);
  REC("ncclCommInitRankConfig", U(comm), I(nranks), id0, I(rank), U(config));
  return init_comm("ncclCommInitRankConfig", comm, nranks, rank);
}

EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId,
                                             ncclUniqueId *ids, ncclConfig_t *config) {
  REC("ncclCommInitRankScalable", U(comm), I(nranks), I(rank), I(nId), U(ids), U(config));
  return init_comm("ncclCommInitRankScalable", comm, nranks, rank);
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *out, int ndev, const int *devlist) {
  REC("ncclCommInitAll", U(out), I(ndev), U(devlist));
  ncclResult_t r = result_of("ncclCommInitAll");
  if (r != ncclSuccess)
    return r;
  ncclUniqueId id;
  ncclGetUniqueId(&id); /* all through the PLT, like NCCL */
  ncclGroupStart();
  for (int i = 0; i < ndev; i++)
    ncclCommInitRank(out + i, ndev, id, i);
  return ncclGroupEnd();
}

static ncclResult_t drop(const char *name, ncclComm_t comm) {
  REC(name, U(comm));
  int i = comm_index(comm);
  if (i < 0) {
    st.foreign_comms++;
    return ncclInvalidArgument;
  }
  free(comms[i]);
  comms[i] = NULL;
  st.live_comms--;
  return result_of(name);
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return drop("ncclCommDestroy", comm);
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return drop("ncclCommAbort", comm);
}

EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  REC("ncclCommFinalize", U(comm));
  CHECK_COMM(comm);
  return result_of("ncclCommFinalize");
}

EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  REC("ncclCommRevoke", U(comm), I(flags));
  CHECK_COMM(comm);
  return result_of("ncclCommRevoke");
}

EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config) {
  REC("ncclCommSplit", U(comm), I(color), I(key), U(newcomm), U(config));
  struct fake_comm *p = comm_get(comm);
  if (p == NULL)
    return ncclInvalidArgument;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = NULL;
    return result_of("ncclCommSplit");
  }
  return init_comm("ncclCommSplit", newcomm, p->nranks, key < p->nranks ? key : 0);
}

EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
                                   ncclConfig_t *config, int flags) {
  REC("ncclCommShrink", U(comm), U(exclude), I(nexclude), U(newcomm), U(config), I(flags));
  struct fake_comm *p = comm_get(comm);
  if (p == NULL)
    return ncclInvalidArgument;
  return init_comm("ncclCommShrink", newcomm, p->nranks - nexclude, 0);
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
  REC("ncclCommGetAsyncError", U(comm), U(err));
  CHECK_COMM(comm);
  if (st.async_in_progress > 0) {
    st.async_in_progress--;
    *err = ncclInProgress;
  } else {
    *err = ncclSuccess;
  }
  return result_of("ncclCommGetAsyncError");
}

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  REC("ncclCommCount", U(comm), U(count));
  struct fake_comm *c = comm_get(comm);
  if (c == NULL)
    return ncclInvalidArgument;
  *count = c->nranks;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *dev) {
  REC("ncclCommCuDevice", U(comm), U(dev));
  struct fake_comm *c = comm_get(comm);
  if (c == NULL)
    return ncclInvalidArgument;
  *dev = c->dev;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  REC("ncclCommUserRank", U(comm), U(rank));
  struct fake_comm *c = comm_get(comm);
  if (c == NULL)
    return ncclInvalidArgument;
  *rank = c->rank;
  return ncclSuccess;
}

/* ---- memory, registration, ops ---- */

EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  REC("ncclMemAlloc", U(ptr), (uint64_t)size);
  *ptr = (void *)(uintptr_t)0x7e570000;
  return result_of("ncclMemAlloc");
}

EXPORT ncclResult_t ncclMemFree(void *ptr) {
  REC("ncclMemFree", U(ptr));
  return result_of("ncclMemFree");
}

EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **h) {
  REC("ncclCommRegister", U(comm), U(buff), (uint64_t)size, U(h));
  CHECK_COMM(comm);
  static uintptr_t next_h = 0x4a4d; /* a handle per registration, as NCCL's */
  /* PCL_FAKE_NULL_HANDLES: NULL for every range, as NCCL's with NCCL_LOCAL_REGISTER=0. */
  *h = getenv("PCL_FAKE_NULL_HANDLES") != NULL ? NULL : (void *)(next_h += 0x10);
  return result_of("ncclCommRegister");
}

EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *h) {
  REC("ncclCommDeregister", U(comm), U(h));
  CHECK_COMM(comm);
  return result_of("ncclCommDeregister");
}

EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                           ncclWindow_t *win, int flags) {
  REC("ncclCommWindowRegister", U(comm), U(buff), (uint64_t)size, U(win), I(flags));
  CHECK_COMM(comm);
  static uintptr_t next_win = 0x3170; /* a handle per window, as NCCL's */
  *win = (ncclWindow_t)(next_win += 0x10);
  return result_of("ncclCommWindowRegister");
}

EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  REC("ncclCommWindowDeregister", U(comm), U(win));
  CHECK_COMM(comm);
  return result_of("ncclCommWindowDeregister");
}

static int next_op = ncclNumOps;

EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t dt,
                                             ncclScalarResidence_t res, ncclComm_t comm) {
  REC("ncclRedOpCreatePreMulSum", U(op), U(scalar), I(dt), I(res), U(comm));
  CHECK_COMM(comm);
  *op = (ncclRedOp_t)next_op++;
  return result_of("ncclRedOpCreatePreMulSum");
}

EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  REC("ncclRedOpDestroy", I(op), U(comm));
  CHECK_COMM(comm);
  return result_of("ncclRedOpDestroy");
}

/* ---- collectives ---- */

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  REC("ncclAllReduce", U(s), U(r), (uint64_t)n, I(t), I(op), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclAllReduce");
}

EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  REC("ncclBroadcast", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclBroadcast");
}

EXPORT ncclResult_t ncclBcast(void *buff, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
                              cudaStream_t stream) {
  REC("ncclBcast", U(buff), (uint64_t)n, I(t), I(root), U(comm), U(stream));
  return ncclBroadcast(buff, buff, n, t, root, comm, stream); /* through the PLT, like NCCL */
}

EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               int root, ncclComm_t comm, cudaStream_t stream) {
  REC("ncclReduce", U(s), U(r), (uint64_t)n, I(t), I(op), I(root), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclReduce");
}

EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t,
                                  ncclComm_t comm, cudaStream_t stream) {
  REC("ncclAllGather", U(s), U(r), (uint64_t)n, I(t), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclAllGather");
}

EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  REC("ncclReduceScatter", U(s), U(r), (uint64_t)n, I(t), I(op), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclReduceScatter");
}

#ifndef FAKE_PARTIAL
EXPORT ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t t,
                                 ncclComm_t comm, cudaStream_t stream) {
  REC("ncclAlltoAll", U(s), U(r), (uint64_t)n, I(t), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclAlltoAll");
}
#endif

EXPORT ncclResult_t ncclGather(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  REC("ncclGather", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclGather");
}

EXPORT ncclResult_t ncclScatter(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                                ncclComm_t comm, cudaStream_t stream) {
  REC("ncclScatter", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclScatter");
}

EXPORT ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  REC("ncclSend", U(s), (uint64_t)n, I(t), I(peer), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclSend");
}

EXPORT ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  REC("ncclRecv", U(r), (uint64_t)n, I(t), I(peer), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclRecv");
}

/* ---- groups ---- */

EXPORT ncclResult_t ncclGroupStart(void) {
  REC("ncclGroupStart", I(st.group_depth));
  st.group_depth++;
  return result_of("ncclGroupStart");
}

static ncclResult_t group_end(const char *name) {
  REC(name, I(st.group_depth));
  if (st.group_depth == 0)
    return ncclInvalidUsage;
  if (--st.group_depth == 0) {
    for (int i = 0; i < npending; i++)
      *pending[i].slot = (ncclComm_t)pending[i].comm;
    npending = 0;
  }
  return result_of(name);
}

EXPORT ncclResult_t ncclGroupEnd(void) {
  return group_end("ncclGroupEnd");
}

EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *info) {
  if (info)
    info->estimatedTime = 42.0f;
  return group_end("ncclGroupSimulateEnd");
}

/* ---- device API ---- */

EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t *reqs,
                                      ncclDevComm_t *out) {
  REC("ncclDevCommCreate", U(comm), U(reqs), U(out));
  CHECK_COMM(comm);
  return result_of("ncclDevCommCreate");
}

EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t *dc) {
  REC("ncclDevCommDestroy", U(comm), U(dc));
  CHECK_COMM(comm);
  return result_of("ncclDevCommDestroy");
}

EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int n,
                                                    ncclLsaBarrierHandle_t *h,
                                                    ncclDevResourceRequirements_t *req) {
  REC("ncclLsaBarrierCreateRequirement", I(team.nRanks), I(team.rank), I(team.stride), I(n), U(h),
      U(req));
  return result_of("ncclLsaBarrierCreateRequirement");
}

EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int n,
                                                    ncclGinBarrierHandle_t *h,
                                                    ncclDevResourceRequirements_t *req) {
  REC("ncclGinBarrierCreateRequirement", U(comm), I(team.nRanks), I(team.rank), I(team.stride),
      I(n), U(h), U(req));
  CHECK_COMM(comm);
  return result_of("ncclGinBarrierCreateRequirement");
}

EXPORT ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *h,
                                               ncclDevResourceRequirements_t *req) {
  REC("ncclLLA2ACreateRequirement", I(nBlocks), I(nSlots), U(h), U(req));
  return result_of("ncclLLA2ACreateRequirement");
}

EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  REC("ncclLLA2ACalcSlots", I(maxElts), I(maxEltSize));
  return maxElts * maxEltSize + 7;
}

static ncclTeam_t team_of(const char *name, ncclComm_t comm, int stride) {
  REC(name, U(comm));
  struct fake_comm *c = comm_get(comm);
  ncclTeam_t t = {c ? c->nranks : -1, c ? c->rank : -1, stride};
  return t;
}

EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  return team_of("ncclTeamWorld", comm, 1);
}

EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  return team_of("ncclTeamLsa", comm, 2);
}

EXPORT ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  return team_of("ncclTeamRail", comm, 3);
}

EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  REC("ncclTeamRankToWorld", U(comm), I(team.nRanks), I(team.rank), I(team.stride), I(rank));
  return comm_get(comm) ? rank * team.stride : -1;
}

EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  REC("ncclTeamRankToLsa", U(comm), I(team.nRanks), I(team.rank), I(team.stride), I(rank));
  return comm_get(comm) ? rank + 1000 : -1;
}

/* ---- NCCL 2.29 to 2.32, each release's functions under its FAKE_LEVEL (FAKE_PARTIAL lacks
 * ncclCommSuspend, ncclGetPeerDevicePointer, ncclParamDumpAll, ncclAllReduceConfig and
 * ncclTeamCft, of 2.29.7, 2.30.3 and 2.31.2) ---- */

#if FAKE_LEVEL >= PCL_NCCL_SINCE_2_29
#ifndef FAKE_PARTIAL
EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  REC("ncclCommSuspend", U(comm), I(flags));
  CHECK_COMM(comm);
  return result_of("ncclCommSuspend");
}
#endif

EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  REC("ncclCommResume", U(comm));
  CHECK_COMM(comm);
  return result_of("ncclCommResume");
}

EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, pcl_comm_mem_stat_t stat, uint64_t *value) {
  REC("ncclCommMemStats", U(comm), I(stat), U(value));
  CHECK_COMM(comm);
  *value = 4096 + (uint64_t)stat;
  return result_of("ncclCommMemStats");
}

EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *id) {
  REC("ncclCommGetUniqueId", U(comm), U(id));
  CHECK_COMM(comm);
  memset(id, 0, sizeof(*id));
  memset(id->internal, FAKE_ID_BYTE + 1, 40);
  return result_of("ncclCommGetUniqueId");
}

/* An existing rank passes its comm and rank -1, a joining one NULL and its new rank. */
EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *id, int rank,
                                 ncclComm_t *newcomm, ncclConfig_t *config) {
  REC("ncclCommGrow", U(comm), I(nRanks), U(id), I(rank), U(newcomm), U(config));
  struct fake_comm *p = NULL;
  if (comm != NULL && (p = comm_get(comm)) == NULL)
    return ncclInvalidArgument;
  return init_comm("ncclCommGrow", newcomm, nRanks, p != NULL ? p->rank : rank);
}

EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm, pcl_comm_properties_t *props) {
  REC("ncclCommQueryProperties", U(comm), U(props));
  CHECK_COMM(comm);
  return result_of("ncclCommQueryProperties");
}

EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **out) {
  REC("ncclWinGetUserPtr", U(comm), U(win), U(out));
  CHECK_COMM(comm);
  *out = (void *)((uintptr_t)win + 1);
  return result_of("ncclWinGetUserPtr");
}

EXPORT ncclResult_t ncclPutSignal(const void *buf, size_t n, ncclDataType_t t, int peer,
                                  ncclWindow_t win, size_t off, int sigIdx, int ctx,
                                  unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  REC("ncclPutSignal", U(buf), (uint64_t)n, I(t), I(peer), U(win), (uint64_t)off, I(sigIdx), I(ctx),
      (uint64_t)flags, U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclPutSignal");
}

EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                               cudaStream_t stream) {
  REC("ncclSignal", I(peer), I(sigIdx), I(ctx), (uint64_t)flags, U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclSignal");
}

EXPORT ncclResult_t ncclWaitSignal(int nDesc, pcl_wait_signal_desc_t *descs, ncclComm_t comm,
                                   cudaStream_t stream) {
  REC("ncclWaitSignal", I(nDesc), U(descs), U(comm), U(stream));
  CHECK_COMM(comm);
  return result_of("ncclWaitSignal");
}

/* Window queries: a pointer derived from the arguments, so tests see what arrived. */
#ifndef FAKE_PARTIAL
EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t win, size_t off, int peer, void **out) {
  REC("ncclGetPeerDevicePointer", U(win), (uint64_t)off, I(peer), U(out));
  *out = (void *)((uintptr_t)win + off + (uintptr_t)peer);
  return result_of("ncclGetPeerDevicePointer");
}
#endif

EXPORT ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t win, size_t off, int lsaRank, void **out) {
  REC("ncclGetLsaDevicePointer", U(win), (uint64_t)off, I(lsaRank), U(out));
  *out = (void *)((uintptr_t)win + off + (uintptr_t)lsaRank);
  return result_of("ncclGetLsaDevicePointer");
}

EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t win, size_t off, void **out) {
  REC("ncclGetLsaMultimemDevicePointer", U(win), (uint64_t)off, U(out));
  *out = (void *)((uintptr_t)win + off);
  return result_of("ncclGetLsaMultimemDevicePointer");
}

EXPORT ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t win, size_t off,
                                                 pcl_multimem_handle_t mm, void **out) {
  REC("ncclGetMultimemDevicePointer", U(win), (uint64_t)off, U(mm.mc_base), U(out));
  *out = (void *)((uintptr_t)mm.mc_base + off);
  return result_of("ncclGetMultimemDevicePointer");
}

EXPORT ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int sizeLog2,
                                                   pcl_gin_outbox_handle_t *h,
                                                   ncclDevResourceRequirements_t *req) {
  REC("ncclGinOutboxCreateRequirement", I(nBlocks), I(sizeLog2), U(h), U(req));
  return result_of("ncclGinOutboxCreateRequirement");
}

EXPORT ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int sizeLog2,
                                                     pcl_gin_inbox_a2a_handle_t *h,
                                                     ncclDevResourceRequirements_t *req) {
  REC("ncclGinInboxA2ACreateRequirement", I(peers.nRanks), I(peers.rank), I(peers.stride),
      I(nBlocks), I(sizeLog2), U(h), U(req));
  return result_of("ncclGinInboxA2ACreateRequirement");
}

#endif /* 2.29 */

#if FAKE_LEVEL >= PCL_NCCL_SINCE_2_30
/* Parameters: one fake parameter, bound to a handle of the fake's own. */
static char fake_param; /* its address is the handle */
#define FAKE_PARAM_VALUE 42

EXPORT ncclResult_t ncclParamBind(pcl_param_handle_t *out, const char *key) {
  REC("ncclParamBind", U(out), U(key));
  *out = (pcl_param_handle_t)(void *)&fake_param;
  return result_of("ncclParamBind");
}

#define FAKE_PARAM_GET(fn, type)                                                                   \
  EXPORT ncclResult_t fn(pcl_param_handle_t h, type *out) {                                        \
    REC(#fn, U(h), U(out));                                                                        \
    *out = (type)FAKE_PARAM_VALUE;                                                                 \
    return result_of(#fn);                                                                         \
  }

FAKE_PARAM_GET(ncclParamGetI8, int8_t)
FAKE_PARAM_GET(ncclParamGetI16, int16_t)
FAKE_PARAM_GET(ncclParamGetI32, int32_t)
FAKE_PARAM_GET(ncclParamGetI64, int64_t)
FAKE_PARAM_GET(ncclParamGetU8, uint8_t)
FAKE_PARAM_GET(ncclParamGetU16, uint16_t)
FAKE_PARAM_GET(ncclParamGetU32, uint32_t)
FAKE_PARAM_GET(ncclParamGetU64, uint64_t)

EXPORT ncclResult_t ncclParamGetStr(pcl_param_handle_t h, const char **out) {
  REC("ncclParamGetStr", U(h), U(out));
  *out = "42";
  return result_of("ncclParamGetStr");
}

EXPORT ncclResult_t ncclParamGet(pcl_param_handle_t h, void *out, int maxLen, int *len) {
  REC("ncclParamGet", U(h), U(out), I(maxLen), U(len));
  *len = 0;
  return result_of("ncclParamGet");
}

EXPORT ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *len) {
  REC("ncclParamGetParameter", U(key), U(value), U(len));
  *value = "42";
  *len = 2;
  return result_of("ncclParamGetParameter");
}

EXPORT ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *len) {
  static const char *keys[] = {"NCCL_FAKE_PARAM"};
  REC("ncclParamGetAllParameterKeys", U(table), U(len));
  *table = keys;
  *len = 1;
  return result_of("ncclParamGetAllParameterKeys");
}

#ifndef FAKE_PARTIAL
EXPORT void ncclParamDumpAll(void) {
  REC("ncclParamDumpAll", 0);
}
#endif

#endif /* 2.30 */

#if FAKE_LEVEL >= PCL_NCCL_SINCE_2_31
EXPORT ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t win, size_t off, int peer,
                                            pcl_cft_le_id_t *le, size_t *leOff) {
  REC("ncclGetPeerDeviceLeInfo", U(win), (uint64_t)off, I(peer), U(le), U(leOff));
  *le = (pcl_cft_le_id_t)peer;
  *leOff = off;
  return result_of("ncclGetPeerDeviceLeInfo");
}

EXPORT ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t win, size_t off, pcl_cft_le_id_t *le,
                                                size_t *leOff) {
  REC("ncclGetMultimemDeviceLeInfo", U(win), (uint64_t)off, U(le), U(leOff));
  *le = 77;
  *leOff = off;
  return result_of("ncclGetMultimemDeviceLeInfo");
}

EXPORT ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t win, size_t off, int peerCft,
                                           ncclTeam_t team, pcl_cft_le_id_t *le, size_t *leOff) {
  REC("ncclGetCftDeviceLeInfo", U(win), (uint64_t)off, I(peerCft), I(team.nRanks), I(team.rank),
      I(team.stride), U(le), U(leOff));
  *le = (pcl_cft_le_id_t)(peerCft * team.stride);
  *leOff = off;
  return result_of("ncclGetCftDeviceLeInfo");
}

#ifndef FAKE_PARTIAL
EXPORT ncclTeam_t ncclTeamCft(ncclComm_t comm, pcl_cft_team_mode_t mode) {
  return team_of("ncclTeamCft", comm, 10 + mode);
}
#endif

EXPORT ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm) {
  return team_of("ncclTeamCftMultimem", comm, 20);
}

/* The per-call-config collectives: the plain call's arguments, then the config (its pointer is
 * recorded: planccl must hand it over untouched). */
#ifndef FAKE_PARTIAL
EXPORT ncclResult_t ncclAllReduceConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                        const pcl_coll_config_t *cfg) {
  REC("ncclAllReduceConfig", U(s), U(r), (uint64_t)n, I(t), I(op), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclAllReduceConfig");
}
#endif

EXPORT ncclResult_t ncclBroadcastConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                        int root, ncclComm_t comm, cudaStream_t stream,
                                        const pcl_coll_config_t *cfg) {
  REC("ncclBroadcastConfig", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclBroadcastConfig");
}

EXPORT ncclResult_t ncclReduceConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                     ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                                     const pcl_coll_config_t *cfg) {
  REC("ncclReduceConfig", U(s), U(r), (uint64_t)n, I(t), I(op), I(root), U(comm), U(stream),
      U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclReduceConfig");
}

EXPORT ncclResult_t ncclAllGatherConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                        ncclComm_t comm, cudaStream_t stream,
                                        const pcl_coll_config_t *cfg) {
  REC("ncclAllGatherConfig", U(s), U(r), (uint64_t)n, I(t), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclAllGatherConfig");
}

EXPORT ncclResult_t ncclReduceScatterConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                            const pcl_coll_config_t *cfg) {
  REC("ncclReduceScatterConfig", U(s), U(r), (uint64_t)n, I(t), I(op), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclReduceScatterConfig");
}

EXPORT ncclResult_t ncclAlltoAllConfig(const void *s, void *r, size_t n, ncclDataType_t t,
                                       ncclComm_t comm, cudaStream_t stream,
                                       const pcl_coll_config_t *cfg) {
  REC("ncclAlltoAllConfig", U(s), U(r), (uint64_t)n, I(t), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclAlltoAllConfig");
}

EXPORT ncclResult_t ncclGatherConfig(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                                     ncclComm_t comm, cudaStream_t stream,
                                     const pcl_coll_config_t *cfg) {
  REC("ncclGatherConfig", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclGatherConfig");
}

EXPORT ncclResult_t ncclScatterConfig(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                                      ncclComm_t comm, cudaStream_t stream,
                                      const pcl_coll_config_t *cfg) {
  REC("ncclScatterConfig", U(s), U(r), (uint64_t)n, I(t), I(root), U(comm), U(stream), U(cfg));
  CHECK_COMM(comm);
  return result_of("ncclScatterConfig");
}
#endif /* 2.31 */

#if FAKE_LEVEL >= PCL_NCCL_SINCE_2_32
EXPORT ncclResult_t ncclSetEncryption(const pcl_encryption_config_t *config) {
  REC("ncclSetEncryption", U(config));
  return result_of("ncclSetEncryption");
}

#endif /* 2.32 */
