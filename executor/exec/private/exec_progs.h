/* SPDX-License-Identifier: MIT
 * Private to the executor: the program table of one context (exec_progs.c), its programs as the
 * builder and launcher (exec.c) see them, and the device memory their images live in. */
#ifndef PCL_EXEC_PROGS_H
#define PCL_EXEC_PROGS_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include "exec.h"

/* One built program: (plan, in bytes, out bytes, root relabelling, registration) -> its image. */
/* prog_t.ew of a program that runs on the EWX kernels: PCL_EXEC_EWX plus their bound (2, 4, 8
 * puts and terms; pcl_kewx_t descriptors). */
#define PCL_EXEC_EWX 16

typedef struct {
  const pcl_plan_t *plan;
  uint64_t in_bytes, out_bytes;
  const pcl_exec_userbuf_t *ub;
  int shift; /* root relabelling (pcl_plan_root_shift): runs plan rank `vrank` */
  int vrank;
  pcl_exec_shape_t shape;
  int resident; /* all dev_ranks grids fit on the device at once (pcl_exec_coresident) */
  int ll;       /* runs on the LL fast-path kernel */
  int simple;   /* runs on the Simple kernel */
  int ew;       /* 0, or runs on the EW kernel for up to `ew` puts and terms (PCL_KVAR_EW*), or on
                   the EWX kernels (PCL_EXEC_EWX + bound) */
  int ew_redop; /* its blocks' reduction (PCL_KOP_REDOP_CALL: the call's) */
  uint32_t ew_off_or; /* OR of its blocks' S and O offsets (the kernel's alignment) */
  void *d_blocks;     /* plan->max_blocks packed programs (EW: pcl_kew_t), `stride` bytes apart */
  uint32_t stride;
  int32_t *d_sems; /* in the same image, after the blocks */
  int threads;     /* threads per block of its launches (pcl_exec_launch_threads) */
  /* The last (dtype, op, force_ll8) prog_check accepted and the packet format it chose: calls
   * repeating it skip the check (plans with port channels recheck the proxy every call). EW:
   * the kernel forms for that (op, packet) on buffers [0] not word-aligned, [1] aligned, and the
   * word (pcl_kernels_ew_form), so a call only tests its buffers' alignment. */
  int ok_valid, ok_dtype, ok_op, ok_ll8, ok_pkt;
  int ok_form[2];
  uint64_t ok_word;
  /* Table bookkeeping (exec_progs.c). */
  void *image;    /* d_blocks: the arena block holding blocks and semaphores */
  int image_cls;  /* its arena class, -1 for an image of its own */
  uint64_t used;  /* the table's tick at its last lookup: least recently used goes first */
  uint8_t kept;   /* built before the table filled: never evicted (a graph may hold it) */
  uint8_t pinned; /* launched into a graph capture: never evicted */
} prog_t;

#define PCL_PROGS_CHUNK (2u << 20) /* bytes of one arena chunk */
#define PCL_PROGS_MIN_CLASS 256u
#define PCL_PROGS_CLASSES 14  /* 256 B .. 2 MiB */
#define PCL_PROGS_SEEN 65536u /* slots of the evicted-key filter (256 KiB of host memory) */

/* Freed images wait here until a launch after their last use has completed. */
typedef struct {
  void *mem;
  int cls;
} pcl_progs_freed_t;

/* The table. Lookups (the hot path) touch `last`, then the open-addressed index; changes
 * (insert, evict, drop) happen under the context's progs_lock, on the calling thread. Eviction
 * starts only once `limit` programs were built (PLANCCL_EXEC_PROGRAMS): the programs of that
 * moment are kept for good, since any of them may sit in a CUDA graph captured unseen; from then
 * on every launch of a newer program asks whether its stream is capturing and pins it if so, and
 * beyond `limit` + `slack` programs the least recently used unpinned newer one goes. Its image is
 * reused only after a later eager launch of the context completed (an event): the context's
 * launches run one after another (pcl_exec_order), so that launch ran after every earlier one. */
typedef struct {
  prog_t *v;
  int n, cap;
  int32_t *index; /* mask + 1 slots: a position in v, or -1 */
  uint32_t mask;
  int last;
  uint64_t tick;
  int limit, slack;
  int watching; /* the table reached `limit` once */
  int newer;    /* programs with kept == 0 */
  /* Sizes cycling through more programs than the table holds would rebuild one per call: the
   * hashes of evicted keys (direct-mapped, PCL_PROGS_SEEN slots) tell a rebuild from a new
   * size, and once rebuilds reach half the slack the slack grows fourfold (memory for a
   * workload that needs it; a drifting one still stays bounded). */
  uint32_t *seen;
  int rebuilds; /* since the slack last grew */
  /* Arena: chunks of PCL_PROGS_CHUNK bytes cut into power-of-two classes from 256 bytes. */
  void **chunks;
  int nchunks, capchunks;
  uint64_t chunk_used; /* bytes handed out of the newest chunk */
  pcl_progs_freed_t *free_list[PCL_PROGS_CLASSES];
  int nfree[PCL_PROGS_CLASSES], capfree[PCL_PROGS_CLASSES];
  /* Freed images: pending (no launch since), covered (by `ev`, recorded after a launch). */
  pcl_progs_freed_t *pend, *cover;
  int npend, ncover, cappend, capcover;
  pcl_progs_freed_t *grave; /* images of removed pinned programs: kept until the context goes */
  int ngrave, capgrave;
  cudaEvent_t ev;
  uint64_t built, evicted, rebuilt, peak;
  uint64_t build_ns, copy_ns; /* host time of the builds, and of issuing their copies */
} pcl_exec_progs_t;

/* The device is the context's (current). Init cannot fail but for the event. */
ncclResult_t pcl_progs_init(pcl_exec_progs_t *t);
/* Logs the table's counts at INFO and frees everything (rank: for the log). */
void pcl_progs_fini(pcl_exec_progs_t *t, int rank);

/* The program of the key, or NULL. */
prog_t *pcl_progs_find(pcl_exec_progs_t *t, const pcl_plan_t *plan, uint64_t in_bytes,
                       uint64_t out_bytes, int shift, const pcl_exec_userbuf_t *ub);
/* A zeroed slot for a new program (may evict one first, or grow); fill it, give it an image
 * with pcl_progs_image, then pcl_progs_commit it or pcl_progs_abandon it. */
ncclResult_t pcl_progs_reserve(pcl_exec_progs_t *t, prog_t **slot);
/* Device memory of at least `bytes` for the reserved program (p->image and p->image_cls). */
ncclResult_t pcl_progs_image(pcl_exec_progs_t *t, prog_t *p, size_t bytes);
void pcl_progs_commit(pcl_exec_progs_t *t, int rank);
void pcl_progs_abandon(pcl_exec_progs_t *t);

/* Removes every program for which drop(p, arg) is nonzero (their images wait as above). */
void pcl_progs_drop(pcl_exec_progs_t *t, int (*drop)(const prog_t *p, const void *arg),
                    const void *arg);

/* 1 when a launch of p has table work after it: p may need a pin, or freed images wait. */
static inline int pcl_progs_busy(const pcl_exec_progs_t *t, const prog_t *p) {
  return (t->watching && !p->kept && !p->pinned) || t->npend != 0 || t->ncover != 0;
}
/* After a successful launch of p on `stream`, when pcl_progs_busy (captured: the stream is
 * capturing, or CUDA could not tell): pins p when the table watches and the launch was
 * captured; moves freed images on (never fails: the worst case keeps them longer). */
void pcl_progs_launched(pcl_exec_progs_t *t, prog_t *p, cudaStream_t stream, int captured);

#endif
