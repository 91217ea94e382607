/* SPDX-License-Identifier: MIT
 * Exported memory, registration, window, reduction-op, device-API, parameter and encryption
 * functions, forwarded with planccl's comm replaced by the real one; windows, handles and structs
 * pass through untouched. Symmetric windows are registered with planccl too (zero-copy plans). */
#include <stdatomic.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "comm.h"
#include "comm_int.h"
#include "log.h"
#include "pcl_check.h"
#include "shim_int.h"

PCL_API ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  PCL_NEED_REAL(ncclMemAlloc);
  return pcl_errors_real_result(F->ncclMemAlloc(ptr, size));
}
PCL_ALIAS(ncclMemAlloc)

PCL_API ncclResult_t ncclMemFree(void *ptr) {
  PCL_NEED_REAL(ncclMemFree);
  return pcl_errors_real_result(F->ncclMemFree(ptr));
}
PCL_ALIAS(ncclMemFree)

/* The real NCCL registers; planccl remembers the range, locally as NCCL does, under a handle of
 * its own that wraps NCCL's (comm_reg.c says why), and exchanges a call's buffers inside such
 * ranges at the first call whose path registration changes (dispatch.c). A non-blocking init must
 * be done first, so that every rank agrees on whether the communicator is planned. */
PCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                      void **handle) {
  PCL_NEED_COMM(ncclCommRegister, comm);
  PCL_CHECK(pcl_comm_refuse_suspended("ncclCommRegister", c));
  ncclResult_t res = pcl_errors_real_result(F->ncclCommRegister(real, buff, size, handle));
  if (res != ncclSuccess || c == NULL || handle == NULL)
    return res;
  pcl_setup_join(c, 1);
  if (pcl_setup_state(c) != PCL_SETUP_DONE || c->pcl == NULL)
    return res;
  pcl_comm_reg_add(c->pcl, buff, size, handle);
  return res;
}
PCL_ALIAS(ncclCommRegister)

PCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  PCL_NEED_COMM(ncclCommDeregister, comm);
  if (c != NULL && pcl_setup_state(c) == PCL_SETUP_DONE && c->pcl != NULL) {
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != c->pcl->cuda_dev)
      cudaSetDevice(c->pcl->cuda_dev);
    handle = pcl_comm_reg_remove(c->pcl, handle);
    if (prev != c->pcl->cuda_dev && prev >= 0)
      cudaSetDevice(prev);
  }
  return pcl_errors_real_result(F->ncclCommDeregister(real, handle));
}
PCL_ALIAS(ncclCommDeregister)

/* Symmetric windows are planccl's too (comm_win.c): the real NCCL registers first (its handle is
 * what the caller gets, for its kernels and the device API), then planccl exchanges the buffer
 * with its peers, every rank in the same order as NCCL requires. Skipped alike on every rank:
 * windows without NCCL_WIN_COLL_SYMMETRIC, pass-through communicators, and registrations inside
 * a group (one thread may drive several ranks there, and the exchange blocks). */
PCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                            ncclWindow_t *win, int winFlags) {
  PCL_NEED_COMM(ncclCommWindowRegister, comm);
  PCL_CHECK(pcl_comm_refuse_suspended("ncclCommWindowRegister", c));
  ncclResult_t res =
      pcl_errors_real_result(F->ncclCommWindowRegister(real, buff, size, win, winFlags));
  if (res != ncclSuccess || c == NULL || win == NULL || !(winFlags & NCCL_WIN_COLL_SYMMETRIC))
    return res;
  if (pcl_group_depth() > 0) {
    PCL_INFO(PCL_LOG_SHIM, "window %p +%zu registered inside a group: NCCL's only", buff, size);
    return res;
  }
  pcl_setup_join(c, 1); /* a non-blocking init must be done: every rank then agrees on c->pcl */
  if (pcl_setup_state(c) != PCL_SETUP_DONE || c->pcl == NULL)
    return res;
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != c->pcl->cuda_dev)
    cudaSetDevice(c->pcl->cuda_dev);
  res = pcl_comm_win_register(c->pcl, buff, size, *win);
  if (prev != c->pcl->cuda_dev && prev >= 0)
    cudaSetDevice(prev);
  return res;
}
PCL_ALIAS(ncclCommWindowRegister)

PCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  PCL_NEED_COMM(ncclCommWindowDeregister, comm);
  if (c != NULL && pcl_setup_state(c) == PCL_SETUP_DONE && c->pcl != NULL) {
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != c->pcl->cuda_dev)
      cudaSetDevice(c->pcl->cuda_dev);
    pcl_comm_win_deregister(c->pcl, win);
    if (prev != c->pcl->cuda_dev && prev >= 0)
      cudaSetDevice(prev);
  }
  return pcl_errors_real_result(F->ncclCommWindowDeregister(real, win));
}
PCL_ALIAS(ncclCommWindowDeregister)

PCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                              ncclDataType_t datatype,
                                              ncclScalarResidence_t residence, ncclComm_t comm) {
  PCL_NEED_COMM(ncclRedOpCreatePreMulSum, comm);
  ncclResult_t res =
      pcl_errors_real_result(F->ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, real));
  /* Remember the op so collectives on this comm accept it. */
  if (res == ncclSuccess && c != NULL && op != NULL)
    PCL_CHECK(pcl_comm_premul_add(c, *op));
  return res;
}
PCL_ALIAS(ncclRedOpCreatePreMulSum)

PCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  PCL_NEED_COMM(ncclRedOpDestroy, comm);
  ncclResult_t res = pcl_errors_real_result(F->ncclRedOpDestroy(op, real));
  if (res == ncclSuccess && c != NULL)
    pcl_comm_premul_remove(c, op);
  return res;
}
PCL_ALIAS(ncclRedOpDestroy)

/* ---- device API (nccl_device.h) ---- */

PCL_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t *reqs,
                                       ncclDevComm_t *outDevComm) {
  PCL_NEED_COMM(ncclDevCommCreate, comm);
  return pcl_errors_real_result(F->ncclDevCommCreate(real, reqs, outDevComm));
}
PCL_ALIAS(ncclDevCommCreate)

PCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t *devComm) {
  PCL_NEED_COMM(ncclDevCommDestroy, comm);
  return pcl_errors_real_result(F->ncclDevCommDestroy(real, devComm));
}
PCL_ALIAS(ncclDevCommDestroy)

PCL_API ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                     ncclLsaBarrierHandle_t *outHandle,
                                                     ncclDevResourceRequirements_t *outReq) {
  PCL_NEED_REAL(ncclLsaBarrierCreateRequirement);
  return pcl_errors_real_result(
      F->ncclLsaBarrierCreateRequirement(team, nBarriers, outHandle, outReq));
}
PCL_ALIAS(ncclLsaBarrierCreateRequirement)

PCL_API ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                     int nBarriers,
                                                     ncclGinBarrierHandle_t *outHandle,
                                                     ncclDevResourceRequirements_t *outReq) {
  PCL_NEED_COMM(ncclGinBarrierCreateRequirement, comm);
  return pcl_errors_real_result(
      F->ncclGinBarrierCreateRequirement(real, team, nBarriers, outHandle, outReq));
}
PCL_ALIAS(ncclGinBarrierCreateRequirement)

PCL_API ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                ncclLLA2AHandle_t *outHandle,
                                                ncclDevResourceRequirements_t *outReq) {
  PCL_NEED_REAL(ncclLLA2ACreateRequirement);
  return pcl_errors_real_result(F->ncclLLA2ACreateRequirement(nBlocks, nSlots, outHandle, outReq));
}
PCL_ALIAS(ncclLLA2ACreateRequirement)

/* The functions below return values, not ncclResult_t: on error they WARN and return -1 or an
 * empty team. */

PCL_API int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return pcl_fallback_none("ncclLLA2ACalcSlots"), -1;
  if (F->ncclLLA2ACalcSlots == NULL)
    return pcl_fallback_missing("ncclLLA2ACalcSlots"), -1;
  return F->ncclLLA2ACalcSlots(maxElts, maxEltSize);
}
PCL_ALIAS(ncclLLA2ACalcSlots)

/* The real comm for a team query, or NULL after a WARN. */
static ncclComm_t team_comm(const char *fn, void *sym_ok, ncclComm_t comm, const void *caller) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return pcl_fallback_none(fn), NULL;
  if (sym_ok == NULL)
    return pcl_fallback_missing(fn), NULL;
  struct ncclComm *c;
  ncclComm_t real;
  if (pcl_comm_lookup_real(fn, comm, caller, &c, &real) != ncclSuccess)
    return NULL;
  return real;
}

#define PCL_TEAM_FN(fn)                                                                            \
  PCL_API ncclTeam_t fn(ncclComm_t comm) {                                                         \
    const struct pcl_nccl_fns *F = pcl_fallback_fns();                                             \
    ncclComm_t real = team_comm(#fn, F ? (void *)F->fn : NULL, comm, PCL_CALLER);                  \
    if (real == NULL)                                                                              \
      return (ncclTeam_t){0, -1, 0};                                                               \
    return F->fn(real);                                                                            \
  }                                                                                                \
  PCL_ALIAS(fn)

PCL_TEAM_FN(ncclTeamWorld)
PCL_TEAM_FN(ncclTeamLsa)
PCL_TEAM_FN(ncclTeamRail)

#define PCL_TEAM_RANK_FN(fn)                                                                       \
  PCL_API int fn(ncclComm_t comm, ncclTeam_t team, int rank) {                                     \
    const struct pcl_nccl_fns *F = pcl_fallback_fns();                                             \
    ncclComm_t real = team_comm(#fn, F ? (void *)F->fn : NULL, comm, PCL_CALLER);                  \
    if (real == NULL)                                                                              \
      return -1;                                                                                   \
    return F->fn(real, team, rank);                                                                \
  }                                                                                                \
  PCL_ALIAS(fn)

PCL_TEAM_RANK_FN(ncclTeamRankToWorld)
PCL_TEAM_RANK_FN(ncclTeamRankToLsa)

/* ---- device API added by 2.29.7 (GIN requirements) and 2.31.2 (CFT teams) ---- */

PCL_TEAM_FN(ncclTeamCftMultimem)

PCL_API ncclTeam_t ncclTeamCft(ncclComm_t comm, pcl_cft_team_mode_t mode) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  ncclComm_t real = team_comm("ncclTeamCft", F ? (void *)F->ncclTeamCft : NULL, comm, PCL_CALLER);
  if (real == NULL)
    return (ncclTeam_t){0, -1, 0};
  return F->ncclTeamCft(real, mode);
}
PCL_ALIAS(ncclTeamCft)

PCL_API ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                                    pcl_gin_outbox_handle_t *outHandle,
                                                    ncclDevResourceRequirements_t *outReq) {
  PCL_NEED_REAL(ncclGinOutboxCreateRequirement);
  return pcl_errors_real_result(
      F->ncclGinOutboxCreateRequirement(nBlocks, size_log2, outHandle, outReq));
}
PCL_ALIAS(ncclGinOutboxCreateRequirement)

PCL_API ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                                      pcl_gin_inbox_a2a_handle_t *outHandle,
                                                      ncclDevResourceRequirements_t *outReq) {
  PCL_NEED_REAL(ncclGinInboxA2ACreateRequirement);
  return pcl_errors_real_result(
      F->ncclGinInboxA2ACreateRequirement(peers, nBlocks, size_log2, outHandle, outReq));
}
PCL_ALIAS(ncclGinInboxA2ACreateRequirement)

/* ---- windows (2.29, 2.31): the window is the real NCCL's own handle, passed as it is ---- */

PCL_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr) {
  PCL_NEED_COMM(ncclWinGetUserPtr, comm);
  return pcl_errors_real_result(F->ncclWinGetUserPtr(real, win, outUserPtr));
}
PCL_ALIAS(ncclWinGetUserPtr)

PCL_API ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                     void **outPtr) {
  PCL_NEED_REAL(ncclGetLsaMultimemDevicePointer);
  return pcl_errors_real_result(F->ncclGetLsaMultimemDevicePointer(window, offset, outPtr));
}
PCL_ALIAS(ncclGetLsaMultimemDevicePointer)

PCL_API ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                  pcl_multimem_handle_t multimem, void **outPtr) {
  PCL_NEED_REAL(ncclGetMultimemDevicePointer);
  return pcl_errors_real_result(F->ncclGetMultimemDevicePointer(window, offset, multimem, outPtr));
}
PCL_ALIAS(ncclGetMultimemDevicePointer)

PCL_API ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                             void **outPtr) {
  PCL_NEED_REAL(ncclGetLsaDevicePointer);
  return pcl_errors_real_result(F->ncclGetLsaDevicePointer(window, offset, lsaRank, outPtr));
}
PCL_ALIAS(ncclGetLsaDevicePointer)

PCL_API ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                              void **outPtr) {
  PCL_NEED_REAL(ncclGetPeerDevicePointer);
  return pcl_errors_real_result(F->ncclGetPeerDevicePointer(window, offset, peer, outPtr));
}
PCL_ALIAS(ncclGetPeerDevicePointer)

PCL_API ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset,
                                                 pcl_cft_le_id_t *leId, size_t *leOffset) {
  PCL_NEED_REAL(ncclGetMultimemDeviceLeInfo);
  return pcl_errors_real_result(F->ncclGetMultimemDeviceLeInfo(window, offset, leId, leOffset));
}
PCL_ALIAS(ncclGetMultimemDeviceLeInfo)

PCL_API ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                            ncclTeam_t cftTeam, pcl_cft_le_id_t *leId,
                                            size_t *leOffset) {
  PCL_NEED_REAL(ncclGetCftDeviceLeInfo);
  return pcl_errors_real_result(
      F->ncclGetCftDeviceLeInfo(window, offset, peerCft, cftTeam, leId, leOffset));
}
PCL_ALIAS(ncclGetCftDeviceLeInfo)

PCL_API ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                             pcl_cft_le_id_t *leId, size_t *leOffset) {
  PCL_NEED_REAL(ncclGetPeerDeviceLeInfo);
  return pcl_errors_real_result(
      F->ncclGetPeerDeviceLeInfo(window, offset, peerWorld, leId, leOffset));
}
PCL_ALIAS(ncclGetPeerDeviceLeInfo)

/* ---- NCCL's parameters (2.30): the real library's, read through it ---- */

PCL_API ncclResult_t ncclParamBind(pcl_param_handle_t *out, const char *key) {
  PCL_NEED_REAL(ncclParamBind);
  return pcl_errors_real_result(F->ncclParamBind(out, key));
}
PCL_ALIAS(ncclParamBind)

#define PCL_PARAM_GET(fn, type)                                                                    \
  PCL_API ncclResult_t fn(pcl_param_handle_t h, type *out) {                                       \
    PCL_NEED_REAL(fn);                                                                             \
    return pcl_errors_real_result(F->fn(h, out));                                                  \
  }                                                                                                \
  PCL_ALIAS(fn)

PCL_PARAM_GET(ncclParamGetI8, int8_t)
PCL_PARAM_GET(ncclParamGetI16, int16_t)
PCL_PARAM_GET(ncclParamGetI32, int32_t)
PCL_PARAM_GET(ncclParamGetI64, int64_t)
PCL_PARAM_GET(ncclParamGetU8, uint8_t)
PCL_PARAM_GET(ncclParamGetU16, uint16_t)
PCL_PARAM_GET(ncclParamGetU32, uint32_t)
PCL_PARAM_GET(ncclParamGetU64, uint64_t)
PCL_PARAM_GET(ncclParamGetStr, const char *)

PCL_API ncclResult_t ncclParamGet(pcl_param_handle_t h, void *out, int maxLen, int *len) {
  PCL_NEED_REAL(ncclParamGet);
  return pcl_errors_real_result(F->ncclParamGet(h, out, maxLen, len));
}
PCL_ALIAS(ncclParamGet)

PCL_API ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen) {
  PCL_NEED_REAL(ncclParamGetParameter);
  return pcl_errors_real_result(F->ncclParamGetParameter(key, value, valueLen));
}
PCL_ALIAS(ncclParamGetParameter)

PCL_API ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen) {
  PCL_NEED_REAL(ncclParamGetAllParameterKeys);
  return pcl_errors_real_result(F->ncclParamGetAllParameterKeys(table, tableLen));
}
PCL_ALIAS(ncclParamGetAllParameterKeys)

/* Returns nothing: without the real function the WARN is all the caller gets. */
PCL_API void ncclParamDumpAll(void) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    pcl_fallback_none("ncclParamDumpAll");
  else if (F->ncclParamDumpAll == NULL)
    pcl_fallback_missing("ncclParamDumpAll");
  else
    F->ncclParamDumpAll();
}
PCL_ALIAS(ncclParamDumpAll)

/* ---- encryption (2.32) ---- */

/* The setting reaches the real NCCL's sockets only. planccl's own bootstrap and TCP port channels
 * (docs/multinode.md) carry data in plain text whatever it says. The config is opaque here, so
 * the caller is told once, at the first successful call, whatever the mode it asked for. */
PCL_API ncclResult_t ncclSetEncryption(const pcl_encryption_config_t *config) {
  PCL_NEED_REAL(ncclSetEncryption);
  ncclResult_t res = pcl_errors_real_result(F->ncclSetEncryption(config));
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  if (res == ncclSuccess && !atomic_flag_test_and_set(&warned))
    PCL_WARN(PCL_LOG_SHIM,
             "ncclSetEncryption: the real NCCL's sockets follow it, but planccl's own bootstrap "
             "and TCP port channels are not encrypted; set PLANCCL_DISABLE=1 if no data may "
             "cross the network in plain text");
  return res;
}
PCL_ALIAS(ncclSetEncryption)
