/* SPDX-License-Identifier: MIT
 * Exported collectives and point-to-point calls: check the arguments (docs/architecture.md, "the
 * path of one call", step 1), build one request, hand it to pcl_dispatch; bad ones get a WARN here.
 * The per-call-config collectives (2.31) go through the dispatcher too; the one-sided calls
 * (2.29) are only forwarded. */
#include "comm.h"
#include "comm_int.h"
#include "dispatch.h"
#include "log.h"
#include "pcl_check.h"
#include "shim_int.h"

/* Which buffers a collective needs, and whether it takes a reduction op / root / peer. */
enum {
  NEED_SEND = 1,
  NEED_RECV = 2,
  SEND_ON_ROOT = 4,
  RECV_ON_ROOT = 8,
  HAS_OP = 16,
  HAS_ROOT = 32,
  HAS_PEER = 64
};

static const unsigned coll_flags[PCL_COLL_COUNT] = {
    [PCL_COLL_ALLREDUCE] = NEED_SEND | NEED_RECV | HAS_OP,
    [PCL_COLL_BROADCAST] = SEND_ON_ROOT | NEED_RECV | HAS_ROOT,
    [PCL_COLL_REDUCE] = NEED_SEND | RECV_ON_ROOT | HAS_OP | HAS_ROOT,
    [PCL_COLL_ALLGATHER] = NEED_SEND | NEED_RECV,
    [PCL_COLL_REDUCESCATTER] = NEED_SEND | NEED_RECV | HAS_OP,
    [PCL_COLL_ALLTOALL] = NEED_SEND | NEED_RECV,
    [PCL_COLL_GATHER] = NEED_SEND | RECV_ON_ROOT | HAS_ROOT,
    [PCL_COLL_SCATTER] = SEND_ON_ROOT | NEED_RECV | HAS_ROOT,
    [PCL_COLL_SEND] = NEED_SEND | HAS_PEER,
    [PCL_COLL_RECV] = NEED_RECV | HAS_PEER,
};

static ncclResult_t check_args(const char *fn, struct pcl_coll_args *a) {
  unsigned f = coll_flags[a->coll];
  if ((int)a->dtype < 0 || (int)a->dtype >= (int)ncclNumTypes) {
    PCL_WARN(PCL_LOG_SHIM, "%s: invalid data type %d", fn, (int)a->dtype);
    return ncclInvalidArgument;
  }
  if (f & HAS_OP) {
    int ok = (int)a->op >= 0 && (int)a->op < (int)ncclNumOps;
    /* A dynamic op is valid only on the comm it was created on; a bare real comm (the real
     * library calling itself) is left to the real library's own check. */
    if (!ok && (int)a->op >= (int)ncclNumOps)
      ok = a->comm == NULL || pcl_comm_premul_known(a->comm, a->op);
    if (!ok) {
      PCL_WARN(PCL_LOG_SHIM,
               "%s: invalid reduction operation %d (neither built in nor a PreMulSum "
               "op created on this communicator)",
               fn, (int)a->op);
      return ncclInvalidArgument;
    }
  }
  int rank = -1, nranks = -1;
  if (a->comm != NULL && (f & (HAS_ROOT | HAS_PEER | SEND_ON_ROOT | RECV_ON_ROOT))) {
    pcl_comm_learn_ranks(a->comm);
    rank = a->comm->rank;
    nranks = a->comm->nranks;
  }
  if ((f & (HAS_ROOT | HAS_PEER)) && (a->root < 0 || (nranks > 0 && a->root >= nranks))) {
    PCL_WARN(PCL_LOG_SHIM, "%s: invalid %s %d (communicator has %d ranks)", fn,
             (f & HAS_PEER) ? "peer" : "root", a->root, nranks);
    return ncclInvalidArgument;
  }
  if (a->count > 0) {
    int is_root = rank >= 0 && rank == a->root;
    int need_send = (f & NEED_SEND) || ((f & SEND_ON_ROOT) && is_root);
    int need_recv = (f & NEED_RECV) || ((f & RECV_ON_ROOT) && is_root);
    if ((need_send && a->sendbuff == NULL) || (need_recv && a->recvbuff == NULL)) {
      PCL_WARN(PCL_LOG_SHIM, "%s: %s buffer is NULL with count %zu", fn,
               need_send && a->sendbuff == NULL ? "send" : "receive", a->count);
      return ncclInvalidArgument;
    }
  }
  return ncclSuccess;
}

static ncclResult_t run(const char *fn, ncclComm_t comm, struct pcl_coll_args *a,
                        const void *caller) {
  if (pcl_fallback_fns() == NULL)
    return pcl_fallback_none(fn);
  PCL_CHECK(pcl_comm_lookup_real(fn, comm, caller, &a->comm, &a->real));
  PCL_CHECK(pcl_comm_refuse_suspended(fn, a->comm));
  PCL_CHECK(check_args(fn, a));
  return pcl_dispatch(a);
}

/* Each collective with a per-call-config twin (2.31): both build the same request, and the twin
 * adds the caller's config. config == NULL is exactly the plain call (planned when a plan fits,
 * else forwarded to the real plain function, which NCCL defines as the same call); a config goes
 * to the real NCCL's same *Config function untouched (pcl_coll_args.config, dispatch.h). Like
 * count and dtype, whether a config is passed must be alike on every rank. */
#define PCL_COLL(fn, params, ...)                                                                  \
  PCL_API ncclResult_t fn(params, ncclComm_t comm, cudaStream_t stream) {                          \
    struct pcl_coll_args a = {__VA_ARGS__, .stream = stream};                                      \
    return run(#fn, comm, &a, PCL_CALLER);                                                         \
  }                                                                                                \
  PCL_ALIAS(fn)                                                                                    \
  PCL_API ncclResult_t fn##Config(params, ncclComm_t comm, cudaStream_t stream,                    \
                                  const pcl_coll_config_t *config) {                               \
    struct pcl_coll_args a = {__VA_ARGS__, .stream = stream, .config = config};                    \
    return run(#fn "Config", comm, &a, PCL_CALLER);                                                \
  }                                                                                                \
  PCL_ALIAS(fn##Config)

/* A parameter list, one macro argument. */
#define PCL_LIST(...) __VA_ARGS__

PCL_COLL(ncclAllReduce,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  ncclRedOp_t op),
         .coll = PCL_COLL_ALLREDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .op = op, .root = -1)
PCL_COLL(ncclBroadcast,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  int root),
         .coll = PCL_COLL_BROADCAST, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .root = root)
PCL_COLL(ncclReduce,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  ncclRedOp_t op, int root),
         .coll = PCL_COLL_REDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .op = op, .root = root)
PCL_COLL(ncclAllGather,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype),
         .coll = PCL_COLL_ALLGATHER, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = sendcount,
         .dtype = datatype, .root = -1)
PCL_COLL(ncclReduceScatter,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                  ncclRedOp_t op),
         .coll = PCL_COLL_REDUCESCATTER, .sendbuff = sendbuff, .recvbuff = recvbuff,
         .count = recvcount, .dtype = datatype, .op = op, .root = -1)
PCL_COLL(ncclAlltoAll,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype),
         .coll = PCL_COLL_ALLTOALL, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .root = -1)
PCL_COLL(ncclGather,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  int root),
         .coll = PCL_COLL_GATHER, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .root = root)
PCL_COLL(ncclScatter,
         PCL_LIST(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  int root),
         .coll = PCL_COLL_SCATTER, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
         .dtype = datatype, .root = root)

PCL_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  struct pcl_coll_args a = {.coll = PCL_COLL_BROADCAST,
                            .legacy_bcast = 1,
                            .sendbuff = buff,
                            .recvbuff = buff,
                            .count = count,
                            .dtype = datatype,
                            .root = root,
                            .stream = stream};
  return run("ncclBcast", comm, &a, PCL_CALLER);
}
PCL_ALIAS(ncclBcast)

PCL_API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream) {
  struct pcl_coll_args a = {.coll = PCL_COLL_SEND,
                            .sendbuff = sendbuff,
                            .count = count,
                            .dtype = datatype,
                            .root = peer,
                            .stream = stream};
  return run("ncclSend", comm, &a, PCL_CALLER);
}
PCL_ALIAS(ncclSend)

PCL_API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream) {
  struct pcl_coll_args a = {.coll = PCL_COLL_RECV,
                            .recvbuff = recvbuff,
                            .count = count,
                            .dtype = datatype,
                            .root = peer,
                            .stream = stream};
  return run("ncclRecv", comm, &a, PCL_CALLER);
}
PCL_ALIAS(ncclRecv)

/* ---- forwarded only ---- */

/* A forwarded call inside a group is recorded, as dispatch records its own forwarded calls, so a
 * planned call made later in the group on the same stream is launched after the real
 * ncclGroupEnd, i.e. after this one (group.c). */
static ncclResult_t note_forward(pcl_coll_t coll, struct ncclComm *c, ncclComm_t real,
                                 cudaStream_t stream) {
  if (c == NULL || pcl_group_depth() == 0)
    return ncclSuccess;
  struct pcl_coll_args a = {.coll = coll, .root = -1, .comm = c, .real = real, .stream = stream};
  return pcl_group_note_forward(&a);
}

/* One-sided calls (2.29): the peer's window is the real NCCL's own handle, which is what
 * ncclCommWindowRegister handed the caller, so only the communicator changes. Refused on a
 * suspended communicator, as the collectives are. */
PCL_API ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype,
                                   int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                                   int ctx, unsigned int flags, ncclComm_t comm,
                                   cudaStream_t stream) {
  PCL_NEED_COMM(ncclPutSignal, comm);
  PCL_CHECK(pcl_comm_refuse_suspended("ncclPutSignal", c));
  PCL_CHECK(note_forward(PCL_COLL_SEND, c, real, stream));
  return pcl_errors_real_result(F->ncclPutSignal(localbuff, count, datatype, peer, peerWin,
                                                 peerWinOffset, sigIdx, ctx, flags, real, stream));
}
PCL_ALIAS(ncclPutSignal)

PCL_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                cudaStream_t stream) {
  PCL_NEED_COMM(ncclSignal, comm);
  PCL_CHECK(pcl_comm_refuse_suspended("ncclSignal", c));
  PCL_CHECK(note_forward(PCL_COLL_SEND, c, real, stream));
  return pcl_errors_real_result(F->ncclSignal(peer, sigIdx, ctx, flags, real, stream));
}
PCL_ALIAS(ncclSignal)

PCL_API ncclResult_t ncclWaitSignal(int nDesc, pcl_wait_signal_desc_t *signalDescs, ncclComm_t comm,
                                    cudaStream_t stream) {
  PCL_NEED_COMM(ncclWaitSignal, comm);
  PCL_CHECK(pcl_comm_refuse_suspended("ncclWaitSignal", c));
  PCL_CHECK(note_forward(PCL_COLL_RECV, c, real, stream));
  return pcl_errors_real_result(F->ncclWaitSignal(nDesc, signalDescs, real, stream));
}
PCL_ALIAS(ncclWaitSignal)
