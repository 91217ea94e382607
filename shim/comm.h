/* SPDX-License-Identifier: MIT
 * planccl's communicator: the object behind every ncclComm_t the application sees. It wraps the
 * real NCCL communicator and will carry planccl's own resources. Live communicators are kept in a
 * process-wide registry, so a NULL, destroyed or garbage handle is refused without being read. */
#ifndef PCL_SHIM_COMM_H
#define PCL_SHIM_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

#define PCL_COMM_START_MAGIC 0x5354415254434c50ull /* "PLCTRATS" */
#define PCL_COMM_END_MAGIC 0x444e45434c50ull       /* "PLCEND" */
#define PCL_COMM_DEAD_MAGIC 0xdeadc0ffeedeadull

/* Owned by later modules; only pointers live here. */
struct pcl_bootstrap;
struct pcl_topo;
struct pcl_channels;
struct pcl_proxy;
struct pcl_registry_view;
struct pcl_comm_stats;

struct ncclComm {
  uint64_t start_magic;
  /* The real NCCL communicator. Its address is handed to the real init/split/shrink as the output
   * slot, so the real library writes it itself: at once for a plain or non-blocking init, at the
   * real ncclGroupEnd for an init inside a group. Always read with pcl_comm_real(). */
  ncclComm_t real;
  struct ncclComm *parent; /* the comm this one was split or shrunk from; NULL otherwise */
  int init_in_progress;    /* the real init returned ncclInProgress (non-blocking) */

  /* Identity; -1 until known (init knows it, children learn it from the real comm lazily). */
  int rank, nranks;
  int cuda_dev, local_rank, ranks_per_node;

  /* PreMulSum ops created on this comm (values >= ncclNumOps), guarded by `lock`. */
  pthread_mutex_t lock;
  ncclRedOp_t *premul_ops;
  int n_premul, cap_premul;

  /* planccl's own resources (later issues). */
  struct pcl_bootstrap *bootstrap;
  struct pcl_topo *topo;
  struct pcl_channels *channels;
  void *scratch;
  size_t scratch_bytes;
  uint64_t *dev_flags; /* device flag counters (per-comm call counter for LL packets) */
  struct pcl_proxy *proxy;
  const struct pcl_registry_view *registry;
  struct pcl_comm_stats *stats;
  _Atomic int async_error; /* an ncclResult_t raised by planccl's own kernels or proxy */
  volatile uint32_t abort_flag;

  uint64_t end_magic;
};

_Static_assert(offsetof(struct ncclComm, start_magic) == 0, "start magic first");
_Static_assert(offsetof(struct ncclComm, end_magic) == sizeof(struct ncclComm) - sizeof(uint64_t),
               "end magic last");

/* Allocates, initialises and registers a comm; rank/nranks may be -1 (unknown). */
ncclResult_t pcl_comm_create(int rank, int nranks, struct ncclComm *parent, struct ncclComm **out);

/* Unregisters and frees: the memory is poisoned and kept in a small graveyard for a while, so a
 * thread still returning from a call on the comm (abort from a watchdog) never reads freed
 * memory. Returns ncclInvalidArgument when `c` is not a live comm. */
ncclResult_t pcl_comm_destroy(struct ncclComm *c);

/* Resolves an API handle. A live planccl comm gives *c = it and *real = its real comm (may be
 * NULL while the real init is still pending). The real comm of a live planccl comm (the real
 * library calling its own exported names, when it was loaded without RTLD_DEEPBIND) gives
 * *c = NULL and *real = the handle; so does any handle when `caller` (the return address of the
 * exported function) lies in a real library that is not deep-bound. Anything else:
 * ncclInvalidArgument with a WARN naming `fn`. */
ncclResult_t pcl_comm_lookup(const char *fn, ncclComm_t handle, const void *caller,
                             struct ncclComm **c, ncclComm_t *real);

/* Like pcl_comm_lookup, but also requires the real comm to exist (WARN + ncclInvalidArgument). */
ncclResult_t pcl_comm_lookup_real(const char *fn, ncclComm_t handle, const void *caller,
                                  struct ncclComm **c, ncclComm_t *real);

static inline ncclComm_t pcl_comm_real(struct ncclComm *c) {
  return __atomic_load_n(&c->real, __ATOMIC_ACQUIRE);
}

/* Fills rank/nranks from the real comm when unknown; leaves -1 when it cannot. */
void pcl_comm_learn_ranks(struct ncclComm *c);

/* PreMulSum op bookkeeping. */
ncclResult_t pcl_comm_premul_add(struct ncclComm *c, ncclRedOp_t op);
int pcl_comm_premul_remove(struct ncclComm *c, ncclRedOp_t op);
int pcl_comm_premul_known(struct ncclComm *c, ncclRedOp_t op);

/* Number of live comms (tests, leak checks). */
int pcl_comm_live_count(void);

#endif
