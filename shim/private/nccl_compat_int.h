/* SPDX-License-Identifier: MIT
 * What NCCL 2.29-2.32's nccl.h declares and the build's may lack (the CUDA toolkit's is 2.28.9):
 * the newer functions and ncclTimeout, in planccl's own words, from the 2.32.6 header; and the
 * one table of which release first exported each function (the loader and the tests use it). */
#ifndef PCL_NCCL_COMPAT_INT_H
#define PCL_NCCL_COMPAT_INT_H

#include <stdint.h>
#include <nccl.h>

/* Every symbol planccl resolves in the real library: all of NCCL 2.28.9's API but the
 * deprecated ncclResetDebugInit (it maps onto ncclResetDebugInitInternal), then, by the first
 * release that exports them, the functions NCCL 2.29.7 to 2.32.3 added. */
/* Lists laid out by hand: the formatter would nest each X deeper than the last. */
/* clang-format off */
#define PCL_NCCL_FNS_2_28(X)                                                                       \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclGetErrorString) X(ncclGetLastError)                   \
  X(ncclResetDebugInitInternal) X(ncclCommInitRank) X(ncclCommInitRankConfig)                      \
  X(ncclCommInitRankScalable) X(ncclCommInitAll) X(ncclCommFinalize) X(ncclCommDestroy)            \
  X(ncclCommAbort) X(ncclCommRevoke) X(ncclCommSplit) X(ncclCommShrink) X(ncclCommGetAsyncError)   \
  X(ncclCommCount) X(ncclCommCuDevice) X(ncclCommUserRank) X(ncclMemAlloc) X(ncclMemFree)          \
  X(ncclCommRegister) X(ncclCommDeregister) X(ncclCommWindowRegister)                              \
  X(ncclCommWindowDeregister) X(ncclRedOpCreatePreMulSum) X(ncclRedOpDestroy) X(ncclAllReduce)     \
  X(ncclBroadcast) X(ncclBcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter)               \
  X(ncclAlltoAll) X(ncclGather) X(ncclScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart)          \
  X(ncclGroupEnd) X(ncclGroupSimulateEnd) X(ncclDevCommCreate) X(ncclDevCommDestroy)               \
  X(ncclLsaBarrierCreateRequirement) X(ncclGinBarrierCreateRequirement)                            \
  X(ncclLLA2ACreateRequirement) X(ncclLLA2ACalcSlots) X(ncclTeamWorld) X(ncclTeamLsa)              \
  X(ncclTeamRail) X(ncclTeamRankToWorld) X(ncclTeamRankToLsa)
#define PCL_NCCL_FNS_2_29(X)                                                                       \
  X(ncclCommSuspend) X(ncclCommResume) X(ncclCommMemStats) X(ncclCommGetUniqueId) X(ncclCommGrow)  \
  X(ncclCommQueryProperties) X(ncclWinGetUserPtr) X(ncclPutSignal) X(ncclSignal) X(ncclWaitSignal) \
  X(ncclGetPeerDevicePointer) X(ncclGetLsaDevicePointer) X(ncclGetLsaMultimemDevicePointer)        \
  X(ncclGetMultimemDevicePointer) X(ncclGinOutboxCreateRequirement)                                \
  X(ncclGinInboxA2ACreateRequirement)
#define PCL_NCCL_FNS_2_30(X)                                                                       \
  X(ncclParamBind) X(ncclParamGet) X(ncclParamGetI8) X(ncclParamGetI16) X(ncclParamGetI32)         \
  X(ncclParamGetI64) X(ncclParamGetU8) X(ncclParamGetU16) X(ncclParamGetU32) X(ncclParamGetU64)    \
  X(ncclParamGetStr) X(ncclParamGetParameter) X(ncclParamGetAllParameterKeys) X(ncclParamDumpAll)
#define PCL_NCCL_FNS_2_31(X)                                                                       \
  X(ncclAllReduceConfig) X(ncclBroadcastConfig) X(ncclReduceConfig) X(ncclAllGatherConfig)         \
  X(ncclReduceScatterConfig) X(ncclAlltoAllConfig) X(ncclGatherConfig) X(ncclScatterConfig)        \
  X(ncclGetPeerDeviceLeInfo) X(ncclGetMultimemDeviceLeInfo) X(ncclGetCftDeviceLeInfo)              \
  X(ncclTeamCft) X(ncclTeamCftMultimem)
#define PCL_NCCL_FNS_2_32(X) X(ncclSetEncryption)
#define PCL_NCCL_FNS(X)                                                                            \
  PCL_NCCL_FNS_2_28(X) PCL_NCCL_FNS_2_29(X) PCL_NCCL_FNS_2_30(X) PCL_NCCL_FNS_2_31(X)              \
  PCL_NCCL_FNS_2_32(X)
/* clang-format on */

/* The first NCCL release exporting each list above but the first (read from the libraries of
 * the nvidia-nccl-cu13 wheels). A real NCCL older than a function's release is expected to lack
 * it: its calls are refused without alarm at load time. */
#define PCL_NCCL_SINCE_2_29 22907 /* 2.29.7 */
#define PCL_NCCL_SINCE_2_30 23003 /* 2.30.3 */
#define PCL_NCCL_SINCE_2_31 23102 /* 2.31.2 */
#define PCL_NCCL_SINCE_2_32 23203 /* 2.32.3 */

/* ncclTimeout, in nccl.h since 2.30.3 (ncclNumResults became 9). The code uses this number: an
 * older header has no enumerator for it. */
#define PCL_NCCL_TIMEOUT 8

/* Each block below is declared only when the header lacks it, and a type the header has becomes
 * planccl's name for it: the header's own prototypes then match planccl's definitions. The
 * versions are those whose nccl.h first declares the block (2.29.3, 2.29.7, 2.30.7, 2.31.2,
 * 2.32.3 on PyPI); a header between them that already had one fails to compile ("conflicting
 * types"), never silently. Structs are only ever passed by pointer and stay opaque here, so no
 * layout is assumed; the profiling twins (pncclX) are declared by PCL_ALIAS. */

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 3)
typedef ncclWaitSignalDesc_t pcl_wait_signal_desc_t;
#else
typedef struct pcl_wait_signal_desc pcl_wait_signal_desc_t;

/* Grow: a per-communicator id from an existing rank, then the collective grow. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
/* One-sided operations on windows. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, pcl_wait_signal_desc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 7)
typedef ncclCommMemStat_t pcl_comm_mem_stat_t;
#else
typedef int pcl_comm_mem_stat_t; /* an int-sized enum: which statistic */

/* Memory offload: release and restore the communicator's GPU memory. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, pcl_comm_mem_stat_t stat, uint64_t *value);
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 7)
typedef ncclParamHandle_t pcl_param_handle_t;
#else
typedef struct pcl_param_handle *pcl_param_handle_t; /* owned by the real NCCL */

/* NCCL's parameters (NCCL_* settings), by handle or by key. */
ncclResult_t ncclParamBind(pcl_param_handle_t *out, const char *key);
ncclResult_t ncclParamGetI8(pcl_param_handle_t h, int8_t *out);
ncclResult_t ncclParamGetI16(pcl_param_handle_t h, int16_t *out);
ncclResult_t ncclParamGetI32(pcl_param_handle_t h, int32_t *out);
ncclResult_t ncclParamGetI64(pcl_param_handle_t h, int64_t *out);
ncclResult_t ncclParamGetU8(pcl_param_handle_t h, uint8_t *out);
ncclResult_t ncclParamGetU16(pcl_param_handle_t h, uint16_t *out);
ncclResult_t ncclParamGetU32(pcl_param_handle_t h, uint32_t *out);
ncclResult_t ncclParamGetU64(pcl_param_handle_t h, uint64_t *out);
ncclResult_t ncclParamGetStr(pcl_param_handle_t h, const char **out);
ncclResult_t ncclParamGet(pcl_param_handle_t h, void *out, int maxLen, int *len);
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
void ncclParamDumpAll(void);
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 31, 2)
typedef ncclCollConfig_t pcl_coll_config_t;
#else
/* Grew between 2.31 and 2.32 (and carries a vendor extension list): never copied or sized. */
typedef struct pcl_coll_config pcl_coll_config_t;

/* The collectives with a per-call config; config == NULL is the plain call. */
ncclResult_t ncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const pcl_coll_config_t *config);
ncclResult_t ncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const pcl_coll_config_t *config);
ncclResult_t ncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const pcl_coll_config_t *config);
ncclResult_t ncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const pcl_coll_config_t *config);
ncclResult_t ncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const pcl_coll_config_t *config);
ncclResult_t ncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const pcl_coll_config_t *config);
ncclResult_t ncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const pcl_coll_config_t *config);
ncclResult_t ncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const pcl_coll_config_t *config);
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 3)
typedef ncclEncryptionConfig_t pcl_encryption_config_t;
#else
typedef struct pcl_encryption_config pcl_encryption_config_t;

/* Encryption of the real NCCL's TCP sockets (process-wide). */
ncclResult_t ncclSetEncryption(const pcl_encryption_config_t *config);
#endif

#endif
