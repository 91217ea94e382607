/* SPDX-License-Identifier: MIT
 * The dispatcher: every collective and point-to-point call goes through pcl_dispatch, which today
 * forwards it unchanged to the real NCCL. The plan path (registry lookup, executor) slots in here,
 * decided from values that are identical on every rank. */
#include "dispatch.h"

#include "comm.h"
#include "log.h"
#include "shim_int.h"

const char *pcl_coll_name(pcl_coll_t coll) {
  static const char *const names[PCL_COLL_COUNT] = {
      "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
      "AlltoAll",  "Gather",    "Scatter", "Send",     "Recv"};
  return (unsigned)coll < PCL_COLL_COUNT ? names[coll] : "?";
}

static ncclResult_t forward(const struct pcl_coll_args *a) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL) return pcl_fallback_none(pcl_coll_name(a->coll));
  ncclResult_t res;
#define NEED(fn)                                                                                   \
  if (F->fn == NULL) return pcl_fallback_missing(#fn)
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
    res = F->ncclScatter(a->sendbuff, a->recvbuff, a->count, a->dtype, a->root, a->real,
                         a->stream);
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
#undef NEED
  return pcl_errors_real_result(res);
}

ncclResult_t pcl_dispatch(const struct pcl_coll_args *a) {
  /* Plan path: a later issue. Everything is forwarded for now. */
  return forward(a);
}
