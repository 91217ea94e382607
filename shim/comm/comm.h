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

#include "dispatch.h"

struct pcl_comm_pcl;   /* planccl's resources of a comm (comm_res.c); NULL = pass-through */
struct pcl_comm_stats; /* PLANCCL_STATS counters (stats.c) */

/* Setup of planccl's part (bootstrap, topology, channels, executor): comm_init.c. */
typedef enum {
  PCL_SETUP_NONE = 0, /* not started: deferred to the outermost ncclGroupEnd */
  PCL_SETUP_RUNNING,  /* on a helper thread (non-blocking init) */
  PCL_SETUP_DONE,     /* finished: c->pcl set (planned) or NULL (pass-through, see why) */
} pcl_setup_state_t;

/* Per-comm cache of dispatch decisions (the hot path computes one only on a miss), keyed by
 * everything the decision depends on that varies per call: sets of ways kept in use order (a
 * hit moves to the front, a miss drops the last way), so a workload cycling through a few
 * hundred sizes still decides each only once. */
#define PCL_DCACHE_SETS 128
#define PCL_DCACHE_WAYS 4
struct pcl_dcache_entry {
  uint64_t bytes_key; /* count (broadcast/reduce: xor root << 48; registered: xor 1 << 63) */
  uint32_t tag;       /* 1 | coll << 1 | inplace << 5 | dtype << 6 | op << 11; 0 = empty */
  uint32_t stat_slot;
  /* Unregistered entries: registered buffers would change the call's path or plan (a zero-copy
   * plan, or the tuning file's entry for registered buffers; pcl_dispatch_registration_matters),
   * so only such calls look their buffers up in the comm's windows and registrations. */
  int reg_matters;
  struct pcl_dispatch_decision d;
};

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

  /* planccl's own part. `pcl` is written once by the setup (release) before setup_state becomes
   * DONE (release); readers check setup_state (acquire) first. */
  struct pcl_comm_pcl *pcl;
  _Atomic int setup_state;   /* pcl_setup_state_t */
  ncclResult_t setup_result; /* planccl setup errors never fail the comm: it degrades to
                                pass-through; this keeps the code for GetAsyncError logs */
  pthread_t setup_thread;    /* PCL_SETUP_RUNNING: joined by destroy / GetAsyncError */
  int setup_thread_live;
  int nonblocking;           /* config->blocking == 0 or the real init returned InProgress */
  char passthrough_why[160]; /* why this comm runs pass-through ("" when planned) */
  struct pcl_comm_stats *stats;
  uint64_t path_logged[PCL_COLL_COUNT]; /* bit k: path of size class 2^k logged at INFO */
  struct pcl_dcache_entry dcache[PCL_DCACHE_SETS][PCL_DCACHE_WAYS];
  _Atomic int async_error; /* an ncclResult_t raised by planccl's own kernels or proxy */
  /* The real ncclCommSuspend succeeded (or is in progress) and no ncclCommResume has succeeded
   * since: collectives and registrations are refused (pcl_comm_refuse_suspended). Relaxed: NCCL
   * forbids calls on a communicator concurrent with its suspend or resume, so the caller orders
   * them; the flag only has to be the value the last of them wrote. */
  _Atomic int suspended;
  int suspended_warned; /* a refusal was WARNed (atomic exchange): once per communicator */
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
 * ncclInvalidArgument with a WARN naming `fn`. Lock-free for a planccl handle this thread looked
 * up before and no comm was destroyed since (a per-thread cache, see comm.c); else one mutex. */
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

/* ncclInvalidUsage when c is suspended, naming `fn` in one WARN per communicator (later refusals
 * at INFO); ncclSuccess otherwise, and for NULL (a bare real comm: the real library judges). */
ncclResult_t pcl_comm_refuse_suspended(const char *fn, struct ncclComm *c);

/* PreMulSum op bookkeeping. */
ncclResult_t pcl_comm_premul_add(struct ncclComm *c, ncclRedOp_t op);
int pcl_comm_premul_remove(struct ncclComm *c, ncclRedOp_t op);
int pcl_comm_premul_known(struct ncclComm *c, ncclRedOp_t op);

/* Number of live comms (tests, leak checks). */
int pcl_comm_live_count(void);

#endif
