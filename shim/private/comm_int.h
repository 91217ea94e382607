/* SPDX-License-Identifier: MIT
 * Private to shim/: planccl's part of a communicator (comm_res.c), its setup jobs (comm_init.c),
 * the process-wide plan registry (plans_dir.c), PLANCCL_STATS (stats.c) and the group queue
 * (group_queue.c, group.c). */
#ifndef PCL_SHIM_COMM_INT_H
#define PCL_SHIM_COMM_INT_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "bootstrap.h"
#include "comm.h"
#include "dispatch.h"
#include "registry.h"

struct pcl_topo;
struct pcl_memchan;
struct pcl_mem_alloc;
struct pcl_exec_ctx;
struct pcl_exec_userbuf;
struct pcl_comm_wins;
struct pcl_comm_regs;

/* ---- comm_res.c: resources of a planned communicator ---- */

struct pcl_comm_pcl {
  pcl_bootstrap_t *boot;
  struct pcl_topo *topo;
  struct pcl_mem_alloc *scratch;
  struct pcl_memchan *memchan;
  struct pcl_portchan *portchan; /* NULL unless some selectable plan uses port channels */
  struct pcl_exec_ctx *exec;
  const pcl_registry_t *reg;
  struct pcl_kernel_caps caps;
  int rank, nranks, ranks_per_node, local_rank, cuda_dev;
  int ranks_per_gpu;       /* the most ranks on one GPU */
  int procs;               /* pcl_tune_procs_t: threads of one process per host, or processes */
  int tuned;               /* every rank follows the same tuning table (or none) for this shape */
  int nnodes;              /* hosts the ranks span */
  int net;                 /* pcl_transport_kind_t between hosts; 0 (NONE) on one host */
  int kernel_error_logged; /* the refusal after a kernel error was WARNed (atomic exchange) */
  size_t scratch_bytes;
  struct pcl_comm_wins *wins;    /* comm_win.c; NULL until the first window */
  struct pcl_comm_regs *regs;    /* comm_reg.c; NULL until the first ncclCommRegister */
  struct pcl_comm_auto *autoreg; /* comm_auto.c; NULL unless automatic registration is on */
};

/* Collective over `boot` (ownership passes to this function, whatever it returns): topology,
 * eligibility and layout (comm_layout.h: hosts grouped alike, peer access inside each host,
 * plans for this shape, the transport between hosts), scratch, memory channels inside each host,
 * port channels where plans use them, and the executor context, with every rank agreeing through
 * bootstrap allgathers. Success with *out set: planned. Success with *out NULL: every rank runs
 * pass-through and `why` says why (boot was destroyed). Never leaves ranks disagreeing, barring a
 * dead peer. */
ncclResult_t pcl_comm_res_create(pcl_bootstrap_t *boot, int cuda_dev, struct pcl_comm_pcl **out,
                                 char *why, size_t whylen);

/* Frees everything. abort: set the executor's abort flag first (spinning kernels give up).
 * Waits for the comm's device to finish the work already queued, never for peers. NULL ok. */
void pcl_comm_res_destroy(struct pcl_comm_pcl *p, int abort);

/* ---- comm_win.c: symmetric windows ---- */

/* Collective, every rank in the same order (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC,
 * after the real NCCL registered `real`): exchanges [buff, buff + size) with the peers. A failed
 * exchange fails on every rank alike and is WARNed; the window is then NCCL's only, and the
 * call still succeeds. Only out of host memory is an error. */
ncclResult_t pcl_comm_win_register(struct pcl_comm_pcl *p, void *buff, size_t size,
                                   ncclWindow_t real);
/* Local: forgets the window and the views over it (nothing planned may still run on it). */
void pcl_comm_win_deregister(struct pcl_comm_pcl *p, ncclWindow_t real);
/* Every window and view (the comm's kernels finished). */
void pcl_comm_wins_destroy(struct pcl_comm_pcl *p);
/* The view of a call's buffers when both lie inside planccl windows (made once per buffer pair,
 * kept until the window goes), else NULL: the call then runs as if unregistered. in_step and
 * out_step as pcl_exec_userbuf_view. */
struct pcl_exec_userbuf *pcl_comm_win_view(struct pcl_comm_pcl *p, const struct pcl_coll_args *a,
                                           uint64_t in_bytes, uint64_t out_bytes, uint64_t in_step,
                                           uint64_t out_step);

/* ---- comm_reg.c: ncclCommRegister'ed buffers ---- */

/* Local, as NCCL's: remembers [buff, buff + size) and replaces *handle (the real NCCL's) by one
 * of planccl's own, unique per registration: NCCL's need not be (NULL for every range with
 * NCCL_LOCAL_REGISTER=0, one refcounted handle for ranges in the same pages), and removing the
 * wrong range would keep pairs of freed memory. Keeps NCCL's handle (and the range NCCL's only)
 * when the table is full or out of memory. Never fails. */
void pcl_comm_reg_add(struct pcl_comm_pcl *p, void *buff, size_t size, void **handle);
/* Local: forgets the range of planccl's handle and the exchanged pairs with a buffer inside it;
 * returns the real NCCL's handle to deregister (the argument itself when it is not planccl's). */
void *pcl_comm_reg_remove(struct pcl_comm_pcl *p, void *handle);
void pcl_comm_regs_destroy(struct pcl_comm_pcl *p);
/* The exchanged registration of a call's (sendbuff, recvbuff) of these extents, or NULL; then
 * *candidate = 1 when both lie in registered ranges and there is room to exchange them. */
struct pcl_exec_userbuf *pcl_comm_reg_find(struct pcl_comm_pcl *p, const struct pcl_coll_args *a,
                                           uint64_t in_bytes, uint64_t out_bytes, int *candidate);
/* Collective (every rank in the same call, all candidates): exchanges the pair and keeps it; NULL
 * after a failure, which fails alike on every rank (WARNed). */
struct pcl_exec_userbuf *pcl_comm_reg_exchange(struct pcl_comm_pcl *p,
                                               const struct pcl_coll_args *a, uint64_t in_bytes,
                                               uint64_t out_bytes);

/* ---- comm_auto.c: automatic registration of ordinary buffers (PLANCCL_AUTO_REG) ---- */

/* Collective at setup, after the executor: agrees whether the communicator registers buffers
 * automatically (every rank the same setting, one host, one rank per process) and maps the vote
 * board. Off (p->autoreg NULL) on every rank alike; an error only when a bootstrap step failed. */
ncclResult_t pcl_comm_auto_setup(struct pcl_comm_pcl *p);
/* Drops every registered allocation (waiting for its last kernel) and the board. NULL ok. */
void pcl_comm_auto_destroy(struct pcl_comm_pcl *p);
/* 1 when a call of msg_bytes (the same on every rank) votes: such calls must all reach
 * pcl_comm_auto_agree, on every rank. */
int pcl_comm_auto_applies(const struct pcl_comm_pcl *p, uint64_t msg_bytes);
/* Collective, one round per applicable call: *ub holds this rank's explicit registration (window
 * view or ncclCommRegister pair) or NULL on entry, and on return what the call runs with,
 * decided alike on every rank: the explicit one, a view of automatically registered allocations
 * (exchanged now or earlier), or NULL (unregistered). can = 0: this rank cannot register now
 * (capture, group). An error after a failed round (a peer that never came, an abort): every later
 * applicable call fails too; or when this rank alone cannot make the agreed view (out of host
 * memory), for this call only (its peers' kernels time out waiting for it). */
ncclResult_t pcl_comm_auto_agree(struct pcl_comm_pcl *p, const volatile uint32_t *abort_flag,
                                 const struct pcl_coll_args *a, uint64_t in_bytes,
                                 uint64_t out_bytes, int can, struct pcl_exec_userbuf **ub);
/* After the launch of a call on registration ub, with the communicator's device current: when
 * pcl_comm_auto_agree gave it ub, marks its allocations' last use on `stream`, which dropping them
 * waits for; anything else is a no-op. */
void pcl_comm_auto_launched(struct pcl_comm_pcl *p, const struct pcl_exec_userbuf *ub,
                            cudaStream_t stream);

/* ---- plans_dir.c ---- */

/* The process's registry: PLANCCL_PLAN_DIR entries, then <prefix>/share/planccl/plans next to
 * the library, then (a library inside its build tree) the source tree's plans/. Created once,
 * lazily; never freed. NULL only when out of memory. */
const pcl_registry_t *pcl_shim_registry(void);

/* ---- tune_setup.c ---- */

/* Once, when the registry is made: reads the tuning file (PLANCCL_TUNE_FILE, else the cache and
 * share directories), loads the opt-in set tuned-only, checks the file's identity and sets the
 * table; writes the identity to PLANCCL_TUNE_IDENTITY when set. lib_dir: the library's
 * directory (NULL when unknown); build_tree, source_plans: as plans_search.h. Never fails: without
 * a usable file the untuned rules hold. */
void pcl_tune_setup(pcl_registry_t *reg, const char *lib_dir, const char *build_tree,
                    const char *source_plans);

/* ---- comm_init.c: planccl's setup of a communicator ---- */

typedef enum { PCL_JOB_INIT, PCL_JOB_SPLIT, PCL_JOB_SHRINK } pcl_job_kind_t;

struct pcl_setup_job {
  struct ncclComm *c; /* NULL: a rank that takes part in a split but gets no child */
  pcl_job_kind_t kind;
  int cuda_dev;
  /* INIT */
  pcl_bootstrap_handle_t handle;
  int has_handle, rank, nranks;
  /* SPLIT, SHRINK */
  struct ncclComm *parent;
  int color, key;
  int *exclude, nexclude, shrink_flags; /* SHRINK; exclude is owned by the job */
};

/* Runs a setup now (blocking), on a helper thread (c->nonblocking), or queues it for the
 * outermost ncclGroupEnd (inside a group). Consumes `job` (copied). */
ncclResult_t pcl_setup_submit(const struct pcl_setup_job *job);

/* Runs jobs to completion, one thread each when there are several (the bootstrap of ranks driven
 * by one thread must progress concurrently). Frees the jobs. */
void pcl_setup_run_all(struct pcl_setup_job **jobs, int n);

/* Joins a helper-thread setup once it finished (wait = 1: also while it runs). */
void pcl_setup_join(struct ncclComm *c, int wait);

/* The state of c's setup (acquire). */
static inline int pcl_setup_state(struct ncclComm *c) {
  return __atomic_load_n((int *)&c->setup_state, __ATOMIC_ACQUIRE);
}

/* 1 when this process can run planccl's own part at all (enabled, a CUDA device). */
int pcl_setup_possible(void);

/* ---- stats.c ---- */

/* Counters of one comm: [PCL_COLL_COUNT][PCL_WHY_COUNT + plans in the registry]. */
struct pcl_stat_cell {
  uint64_t calls, bytes;
};
struct pcl_comm_stats {
  const pcl_registry_t *reg;
  int nslots;
  struct pcl_stat_cell *cells;
};

ncclResult_t pcl_stats_create(const pcl_registry_t *reg, struct pcl_comm_stats **out);
void pcl_stats_destroy(struct pcl_comm_stats *s);
/* Prints the table of c to stderr when PLANCCL_STATS is set. */
void pcl_stats_print(struct ncclComm *c);
/* The counter slot of a decision. */
uint32_t pcl_stats_slot(const struct pcl_comm_stats *s, const struct pcl_dispatch_decision *d);
static inline void pcl_stats_add(struct pcl_comm_stats *s, pcl_coll_t coll, uint32_t slot,
                                 uint64_t bytes) {
  if (s == NULL || slot >= (uint32_t)s->nslots)
    return;
  struct pcl_stat_cell *cell = &s->cells[(size_t)coll * (size_t)s->nslots + slot];
  cell->calls++;
  cell->bytes += bytes;
}
/* PLANCCL_DEBUG=INFO: logs the path of (coll, size class) once per comm. */
void pcl_stats_log_path(struct ncclComm *c, const struct pcl_coll_args *a, int inplace,
                        const struct pcl_dispatch_decision *d);

/* ---- group.c ---- */

/* Inside a group: queue a planned call for the outermost ncclGroupEnd / note a forwarded one
 * (its stream orders later planned calls, see group.c). */
ncclResult_t pcl_group_enqueue(const struct pcl_coll_args *a,
                               const struct pcl_dispatch_decision *d);
ncclResult_t pcl_group_note_forward(const struct pcl_coll_args *a);
/* Inside a group: queue a setup job for the outermost ncclGroupEnd (copied). */
ncclResult_t pcl_group_defer_setup(const struct pcl_setup_job *job);

#endif
