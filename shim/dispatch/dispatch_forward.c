/* SPDX-License-Identifier: MIT
 * Forwarding one request to the real NCCL, unchanged but for planccl's communicator replaced by
 * the real one: the plain function, or the nccl*Config twin when the call carried a config. A
 * function the loaded library lacks is refused with ncclInvalidUsage (pcl_fallback_missing). */
#include "dispatch.h"
#include "log.h"
#include "shim_int.h"

#define NEED(fn)                                                                                   \
  if (F->fn == NULL)                                                                               \
  return pcl_fallback_missing(#fn)

/* The config pointer goes through as it came: planccl never reads, sizes or copies it. */
static ncclResult_t forward_config(const struct pcl_nccl_fns *F, const struct pcl_coll_args *a) {
  const pcl_coll_config_t *cfg = a->config;
  ncclResult_t res;
  switch (a->coll) {
  case PCL_COLL_ALLREDUCE:
    NEED(ncclAllReduceConfig);
    res = F->ncclAllReduceConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->real,
                                 a->stream, cfg);
    break;
  case PCL_COLL_BROADCAST:
    NEED(ncclBroadcastConfig);
    res = F->ncclBroadcastConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real,
                                 a->stream, cfg);
    break;
  case PCL_COLL_REDUCE:
    NEED(ncclReduceConfig);
    res = F->ncclReduceConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->root, a->real,
                              a->stream, cfg);
    break;
  case PCL_COLL_ALLGATHER:
    NEED(ncclAllGatherConfig);
    res = F->ncclAllGatherConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->real, a->stream,
                                 cfg);
    break;
  case PCL_COLL_REDUCESCATTER:
    NEED(ncclReduceScatterConfig);
    res = F->ncclReduceScatterConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->real,
                                     a->stream, cfg);
    break;
  case PCL_COLL_ALLTOALL:
    NEED(ncclAlltoAllConfig);
    res = F->ncclAlltoAllConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->real, a->stream,
                                cfg);
    break;
  case PCL_COLL_GATHER:
    NEED(ncclGatherConfig);
    res = F->ncclGatherConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real,
                              a->stream, cfg);
    break;
  case PCL_COLL_SCATTER:
    NEED(ncclScatterConfig);
    res = F->ncclScatterConfig(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real,
                               a->stream, cfg);
    break;
  default:
    PCL_WARN(PCL_LOG_SHIM, "internal error: %s has no per-call-config form",
             pcl_coll_name(a->coll));
    return ncclInternalError;
  }
  return pcl_errors_real_result(res);
}

ncclResult_t pcl_dispatch_forward(const struct pcl_coll_args *a) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return pcl_fallback_none(pcl_coll_name(a->coll));
  if (a->config != NULL)
    return forward_config(F, a);
  ncclResult_t res;
  switch (a->coll) {
  case PCL_COLL_ALLREDUCE:
    NEED(ncclAllReduce);
    res = F->ncclAllReduce(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->real, a->stream);
    break;
  case PCL_COLL_BROADCAST:
    if (a->legacy_bcast) {
      NEED(ncclBcast);
      res = F->ncclBcast(a->recvbuff, a->count, a->dtype, a->root, a->real, a->stream);
    } else {
      NEED(ncclBroadcast);
      res = F->ncclBroadcast(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real,
                             a->stream);
    }
    break;
  case PCL_COLL_REDUCE:
    NEED(ncclReduce);
    res = F->ncclReduce(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->root, a->real,
                        a->stream);
    break;
  case PCL_COLL_ALLGATHER:
    NEED(ncclAllGather);
    res = F->ncclAllGather(a->sendbuff, a->recvbuff, a->count, a->dtype, a->real, a->stream);
    break;
  case PCL_COLL_REDUCESCATTER:
    NEED(ncclReduceScatter);
    res = F->ncclReduceScatter(a->sendbuff, a->recvbuff, a->count, a->dtype, a->op, a->real,
                               a->stream);
    break;
  case PCL_COLL_ALLTOALL:
    NEED(ncclAlltoAll);
    res = F->ncclAlltoAll(a->sendbuff, a->recvbuff, a->count, a->dtype, a->real, a->stream);
    break;
  case PCL_COLL_GATHER:
    NEED(ncclGather);
    res = F->ncclGather(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real, a->stream);
    break;
  case PCL_COLL_SCATTER:
    NEED(ncclScatter);
    res = F->ncclScatter(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real, a->stream);
    break;
  case PCL_COLL_SEND:
    NEED(ncclSend);
    res = F->ncclSend(a->sendbuff, a->count, a->dtype, a->root, a->real, a->stream);
    break;
  case PCL_COLL_RECV:
    NEED(ncclRecv);
    res = F->ncclRecv(a->recvbuff, a->count, a->dtype, a->root, a->real, a->stream);
    break;
  default:
    PCL_WARN(PCL_LOG_SHIM, "internal error: unknown collective %d", (int)a->coll);
    return ncclInternalError;
  }
  return pcl_errors_real_result(res);
}
