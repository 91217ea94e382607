/* SPDX-License-Identifier: MIT
 * One request per collective or point-to-point call, the pure decision of how it runs (plan on
 * planccl's executor, the real NCCL, a no-op, or an error), and the dispatcher that carries the
 * decision out. The decision depends only on values identical on every rank. */
#ifndef PCL_SHIM_DISPATCH_H
#define PCL_SHIM_DISPATCH_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "dtype.h" /* dtype names and sizes (common/dtypes.def) */
#include "plan.h"
#include "registry.h"

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
  /* The ncclCollConfig_t of an nccl*Config call (2.31), or NULL (the plain call, or a config call
   * passing NULL). Never read, sized or copied: its layout grows between releases and it carries
   * a vendor extension list. Only handed to the real NCCL's same *Config function. */
  const void *config;
  /* Set by the dispatcher: the view of both buffers inside planccl windows (zero-copy plans may
   * run), or NULL. */
  struct pcl_exec_userbuf *ub;
};

/* Name of a collective for messages ("AllReduce"...). */
const char *pcl_coll_name(pcl_coll_t coll);

/* ---- the decision (dispatch_decide.c: pure, CPU only, unit-tested) ---- */

typedef enum {
  PCL_PATH_NOOP = 0, /* count 0: success without doing anything */
  PCL_PATH_PLAN,     /* planccl's executor runs decision.plan */
  PCL_PATH_NCCL,     /* forwarded to the real NCCL */
  PCL_PATH_ERROR,    /* nothing can run it: ncclInvalidUsage */
} pcl_path_t;

/* Why a path was taken (names in pcl_why_name; also the NCCL rows of PLANCCL_STATS). */
typedef enum {
  PCL_WHY_PLAN = 0,      /* a plan matched and the kernels support dtype/op */
  PCL_WHY_COUNT0,        /* count 0 */
  PCL_WHY_NOT_PLANNED,   /* send/recv, alltoall, gather, scatter: always NCCL for now */
  PCL_WHY_DISABLED,      /* PLANCCL_DISABLE */
  PCL_WHY_FORCED,        /* PLANCCL_FORCE_FALLBACK */
  PCL_WHY_PASSTHROUGH,   /* the communicator runs in pass-through mode */
  PCL_WHY_PREMULSUM,     /* PreMulSum op */
  PCL_WHY_NO_PLAN,       /* no plan for (collective, world, rpn, in-place, bytes) */
  PCL_WHY_DTYPE,         /* a plan matched but the kernels lack the dtype */
  PCL_WHY_REDOP,         /* a plan matched but the kernels lack (dtype, op) */
  PCL_WHY_EXEC,          /* the executor cannot run the plan for this shape */
  PCL_WHY_SIZE_OVERFLOW, /* the message size does not fit 64 bits */
  PCL_WHY_BARE_REAL,     /* called with the real NCCL's own comm handle */
  PCL_WHY_ROOT,          /* broadcast/reduce with a root other than 0 (plans are written for
                            root 0: the JSON format has no root) */
  PCL_WHY_PLAN_OP,       /* the plan names a reduce_op other than the call's */
  PCL_WHY_PLACEMENT,     /* broadcast/reduce whose in-place and out-of-place plans differ for
                            non-roots (or only one exists): ranks may see placement differently */
  PCL_WHY_TUNED_NCCL,    /* the tuning file measured NCCL faster for this call */
  PCL_WHY_CALL_CONFIG,   /* an nccl*Config call with a config: only the real NCCL can honour it */
  PCL_WHY_COUNT
} pcl_why_t;

const char *pcl_why_name(pcl_why_t why);

/* Bit of a collective in the forced-fallback mask. */
#define PCL_COLL_BIT(coll) (1u << (unsigned)(coll))
#define PCL_COLL_ALL_BITS ((1u << PCL_COLL_COUNT) - 1u)

/* What the kernels can do, as plain data (filled once from kernels/kernels.h). */
struct pcl_kernel_caps {
  uint32_t dtypes;               /* bit per ncclDataType_t */
  uint32_t redops[ncclNumTypes]; /* per dtype: bit per built-in ncclRedOp_t */
};

struct pcl_dispatch_inputs {
  /* The request (values every rank passes alike). */
  pcl_coll_t coll;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int inplace;
  int root;       /* broadcast, reduce */
  int registered; /* both buffers are registered (window, ncclCommRegister, automatic): zero-copy
                     plans are candidates, and the tuning file's entries for registered buffers
                     apply */
  /* A per-call config came with the call (nccl*Config, config != NULL). Like count and dtype its
   * presence is assumed alike on every rank (NCCL asks the same of a collective's arguments): a
   * rank passing one while a peer passes NULL would forward while the peer runs a plan. */
  int call_config;
  /* The communicator and the process. */
  int nranks, ranks_per_node;
  int ranks_per_gpu;                  /* the most ranks sharing one GPU (1: a GPU each) */
  int procs;                          /* pcl_tune_procs_t: a host's ranks threads or processes */
  int untuned;                        /* the ranks read different tuning tables: ignore them */
  int planccl_ok;                     /* 0: pass-through communicator */
  int disabled;                       /* PLANCCL_DISABLE */
  uint32_t force_mask;                /* parsed PLANCCL_FORCE_FALLBACK */
  int have_real;                      /* the real NCCL is loaded and exports this collective */
  const pcl_registry_t *registry;     /* NULL: no plans */
  const struct pcl_kernel_caps *caps; /* NULL: no kernels */
};

struct pcl_dispatch_decision {
  pcl_path_t path;
  pcl_why_t why;
  const pcl_plan_t *plan;       /* PLAN (and DTYPE/REDOP: the plan that matched) */
  uint64_t msg_bytes;           /* the registry's message size (0 when not computed) */
  uint64_t in_bytes, out_bytes; /* PLAN: pcl_plan_buffer_bytes of msg_bytes */
};

/* Pure: the same inputs give the same decision on every rank. Never fails. */
void pcl_dispatch_decide(const struct pcl_dispatch_inputs *in, struct pcl_dispatch_decision *out);

/* Pure: 1 when registering the call's buffers changes what runs it: the decision with
 * registered = 1 runs a zero-copy plan, or takes another path or plan than with registered = 0
 * (a tuning entry for registered buffers that chose otherwise). Another reason alone (forwarded
 * either way) does not count. in->registered is not read. */
int pcl_dispatch_registration_matters(const struct pcl_dispatch_inputs *in);

/* Parses a PLANCCL_FORCE_FALLBACK value ("all", or a comma list of names such as
 * "allreduce,allgather"; case-insensitive; "bcast" is broadcast). Unknown names are reported in
 * *bad (first one, may be NULL). NULL or "" gives 0. */
uint32_t pcl_dispatch_parse_fallback(const char *list, char *bad, size_t badlen);

/* Message size the registry compares (see executor/plan/plan.h); 0 with *ok = 0 on overflow. */
uint64_t pcl_dispatch_msg_bytes(pcl_coll_t coll, size_t count, ncclDataType_t dtype, int nranks,
                                int *ok);

/* ---- the dispatcher (dispatch.c) ---- */

/* Runs one checked request. */
ncclResult_t pcl_dispatch(const struct pcl_coll_args *a);

/* Forwards one request to the real NCCL unchanged. */
ncclResult_t pcl_dispatch_forward(const struct pcl_coll_args *a);

/* Launches a planned request now on its comm's device (used by the group flush). */
ncclResult_t pcl_dispatch_launch(const struct pcl_coll_args *a,
                                 const struct pcl_dispatch_decision *d);

#endif
