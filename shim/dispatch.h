/* SPDX-License-Identifier: MIT
 * One request per collective or point-to-point call, and the one function that decides how it
 * runs (today: always the real NCCL; later: a plan on planccl's executor when one matches). */
#ifndef PCL_SHIM_DISPATCH_H
#define PCL_SHIM_DISPATCH_H

#include <stddef.h>
#include <nccl.h>

typedef enum {
  PCL_COLL_ALLREDUCE,
  PCL_COLL_BROADCAST,
  PCL_COLL_REDUCE,
  PCL_COLL_ALLGATHER,
  PCL_COLL_REDUCESCATTER,
  PCL_COLL_ALLTOALL,
  PCL_COLL_GATHER,
  PCL_COLL_SCATTER,
  PCL_COLL_SEND,
  PCL_COLL_RECV,
  PCL_COLL_COUNT
} pcl_coll_t;

struct pcl_coll_args {
  pcl_coll_t coll;
  int legacy_bcast; /* came in as ncclBcast (in place, forwarded as ncclBcast) */
  const void *sendbuff;
  void *recvbuff;
  size_t count; /* elements, with NCCL's meaning for this collective */
  ncclDataType_t dtype;
  ncclRedOp_t op;        /* reductions only */
  int root;              /* root, or peer for send/recv; -1 when unused */
  struct ncclComm *comm; /* planccl's comm; NULL when called with a bare real comm */
  ncclComm_t real;       /* the real NCCL comm, never NULL */
  cudaStream_t stream;
};

/* Name of a collective for messages ("AllReduce"...). */
const char *pcl_coll_name(pcl_coll_t coll);

/* Runs one checked request. */
ncclResult_t pcl_dispatch(const struct pcl_coll_args *a);

#endif
