/* SPDX-License-Identifier: MIT
 * The record of one group's calls: append in call order, then split planned calls into those
 * issued before and after the real ncclGroupEnd. */
#include "group_int.h"

#include "alloc.h"

ncclResult_t pcl_group_queue_push(struct pcl_group_queue *q, const struct pcl_group_call *call) {
  if (q->n == q->cap) {
    int cap = q->cap ? q->cap * 2 : 32;
    struct pcl_group_call *c =
        pcl_realloc(q->calls, (size_t)q->cap, (size_t)cap, sizeof(*c), "group calls");
    if (c == NULL)
      return ncclSystemError;
    q->calls = c;
    q->cap = cap;
  }
  q->calls[q->n++] = *call;
  return ncclSuccess;
}

int pcl_group_queue_order(struct pcl_group_queue *q) {
  int planned = 0;
  for (int i = 0; i < q->n; i++) {
    struct pcl_group_call *c = &q->calls[i];
    c->after = 0;
    if (!c->planned)
      continue;
    planned++;
    /* Quadratic in the group's size, but groups mixing both kinds are short, and a group
     * without forwarded calls never enters the inner loop's body. */
    for (int j = 0; j < i && !c->after; j++)
      if (!q->calls[j].planned && q->calls[j].a.stream == c->a.stream)
        c->after = 1;
  }
  return planned;
}

void pcl_group_queue_reset(struct pcl_group_queue *q) {
  q->n = 0;
}

void pcl_group_queue_fini(struct pcl_group_queue *q) {
  pcl_free(q->calls);
  q->calls = NULL;
  q->n = q->cap = 0;
}
