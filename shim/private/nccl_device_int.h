/* SPDX-License-Identifier: MIT
 * C declarations of the host functions of NCCL's device API (the nccl_device headers are C++ only),
 * with the exact ABI of NCCL 2.28.9: opaque pointers, and ncclTeam_t passed and returned by value.
 */
#ifndef PCL_NCCL_DEVICE_INT_H
#define PCL_NCCL_DEVICE_INT_H

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
