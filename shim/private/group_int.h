/* SPDX-License-Identifier: MIT
 * Private to shim/: the thread-local record of the calls made inside one ncclGroupStart/End
 * (group_queue.c), kept apart from group.c so its bookkeeping is unit-tested without a GPU. */
#ifndef PCL_SHIM_GROUP_INT_H
#define PCL_SHIM_GROUP_INT_H

#include <stdint.h>
#include <nccl.h>
#include "dispatch.h"

/* One collective call made inside a group, in call order. */
struct pcl_group_call {
  struct pcl_coll_args a;
  struct pcl_dispatch_decision d;
  uint8_t planned; /* 1: planccl launches it at the outermost end; 0: forwarded at once */
  uint8_t after;   /* planned, and issued after the real ncclGroupEnd (pcl_group_queue_order) */
};

/* A growable array reused for the life of the thread: no allocation once it has grown. */
struct pcl_group_queue {
  struct pcl_group_call *calls;
  int n, cap;
};

/* Appends a copy of *call (grows the array when full). */
ncclResult_t pcl_group_queue_push(struct pcl_group_queue *q, const struct pcl_group_call *call);

/* Decides, for every planned call, whether it is issued before the real ncclGroupEnd
 * (after = 0) or after it (after = 1): a planned call goes after iff an earlier call of the
 * group on the same stream was forwarded to the real NCCL, so each stream sees its planned and
 * forwarded work in call order as far as possible (see group.c for the argument). Returns the
 * number of planned calls. */
int pcl_group_queue_order(struct pcl_group_queue *q);

/* Forgets the calls, keeps the memory. */
void pcl_group_queue_reset(struct pcl_group_queue *q);

/* Frees the memory (thread exit). */
void pcl_group_queue_fini(struct pcl_group_queue *q);

#endif
