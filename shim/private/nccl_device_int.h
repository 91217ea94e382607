/* SPDX-License-Identifier: MIT
 * C declarations of the host functions of NCCL's device API (the nccl_device headers are C++ only),
 * with the exact ABI of NCCL 2.28.9 to 2.32.6: opaque pointers, ncclTeam_t by value. */
#ifndef PCL_NCCL_DEVICE_INT_H
#define PCL_NCCL_DEVICE_INT_H

#include <stdint.h>
#include <nccl.h>

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* Same layout as nccl_device/core.h's struct ncclTeam. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t *reqs,
                               ncclDevComm_t *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t *devComm);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* ---- added in 2.29.7 to 2.31.2 (nccl_device/host.h of 2.32.6) ----
 * The types are planccl's names for NCCL's (which planccl never includes): structs are opaque and
 * only passed by pointer, except the multimem handle, which NCCL passes by value. */
typedef struct pcl_comm_properties pcl_comm_properties_t;           /* ncclCommProperties_t */
typedef struct pcl_gin_outbox_handle pcl_gin_outbox_handle_t;       /* ncclGinOutboxHandle */
typedef struct pcl_gin_inbox_a2a_handle pcl_gin_inbox_a2a_handle_t; /* ncclGinInboxA2AHandle */
typedef uint32_t pcl_cft_le_id_t;                                   /* ncclCftLeId */
typedef int pcl_cft_team_mode_t; /* ncclCftTeamMode_t, an int-sized enum */

/* ncclMultimemHandle_t: the one layout assumed here, because it is passed by value. It has been
 * one pointer (mcBasePtr) in every NCCL from 2.29.7 to 2.32.6. */
typedef struct pcl_multimem_handle {
  void *mc_base;
} pcl_multimem_handle_t;

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, pcl_comm_properties_t *props);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          pcl_multimem_handle_t multimem, void **outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void **outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset, pcl_cft_le_id_t *leId,
                                         size_t *leOffset);
ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                    ncclTeam_t cftTeam, pcl_cft_le_id_t *leId, size_t *leOffset);
ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                     pcl_cft_le_id_t *leId, size_t *leOffset);
ncclTeam_t ncclTeamCft(ncclComm_t comm, pcl_cft_team_mode_t mode);
ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm);
/* Exported on Linux since 2.29.7 though the header declares them for Windows only. */
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                            pcl_gin_outbox_handle_t *outHandle,
                                            ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              pcl_gin_inbox_a2a_handle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq);

/* Exported by libnccl but declared in no header. */
void ncclResetDebugInitInternal(void);

/* The profiling twins of the above (nccl.h declares the others). */
ncclResult_t pncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t *, ncclDevComm_t *);
ncclResult_t pncclDevCommDestroy(ncclComm_t, const ncclDevComm_t *);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t *,
                                              ncclDevResourceRequirements_t *);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t *,
                                              ncclDevResourceRequirements_t *);
ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t *,
                                         ncclDevResourceRequirements_t *);
int pncclLLA2ACalcSlots(int, int);
ncclTeam_t pncclTeamWorld(ncclComm_t);
ncclTeam_t pncclTeamLsa(ncclComm_t);
ncclTeam_t pncclTeamRail(ncclComm_t);
int pncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int);
int pncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int);

#endif
