/* SPDX-License-Identifier: MIT
 * Calls in segments: an elementwise collective whose plan would need more scratch than the
 * communicator has runs as consecutive calls of the same plan on sub-ranges of its buffers
 * (pcl_plan_segment_bytes), so scratch stays bounded whatever the message size. */
#include <string.h>

#include "exec_int.h"
#include "log.h"
#include "pcl_check.h"

typedef struct {
  uint64_t seg, count, last; /* count segments of seg bytes, the last of `last` */
} segs_t;

/* One segment (no split) unless the call is unregistered, in and out are the message's size and
 * the plan's scratch for it does not fit while a segment's does. */
static void segs_of(const pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                    segs_t *s) {
  const uint64_t msg = a->in_bytes;
  s->seg = s->last = msg;
  s->count = 1;
  /* Registered buffers run zero-copy plans (no staging) on the exact pointers registered. */
  if (plan == NULL || a->ub != NULL || a->in_bytes != a->out_bytes || msg == 0)
    return;
  const uint64_t seg = pcl_plan_segment_bytes(plan, msg, pcl_exec_scratch_avail(c, plan));
  if (seg == 0 || seg >= msg)
    return; /* whole: it fits, or the per-shape checks refuse it with their own reason */
  s->seg = seg;
  s->count = (msg + seg - 1) / seg;
  s->last = msg - (s->count - 1) * seg;
}

/* Segment k of the call. Buffers a rank does not pass (NULL) stay NULL. */
static pcl_exec_args_t seg_args(const pcl_exec_args_t *a, const segs_t *s, uint64_t k) {
  pcl_exec_args_t x = *a;
  const uint64_t off = k * s->seg;
  x.in = a->in != NULL ? (const char *)a->in + off : NULL;
  x.out = a->out != NULL ? (char *)a->out + off : NULL;
  x.in_bytes = x.out_bytes = k + 1 == s->count ? s->last : s->seg;
  return x;
}

uint64_t pcl_exec_segments(const pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                           const pcl_exec_args_t *a, uint64_t *seg_bytes) {
  segs_t s;
  segs_of(c, plan, a, &s);
  if (seg_bytes != NULL)
    *seg_bytes = s.seg;
  return s.count;
}

int pcl_exec_supported(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  segs_t s;
  segs_of(c, plan, a, &s);
  if (s.count == 1)
    return pcl_exec_one_supported(c, plan, a);
  pcl_exec_args_t first = seg_args(a, &s, 0), last = seg_args(a, &s, s.count - 1);
  return pcl_exec_one_supported(c, plan, &first) &&
         (s.last == s.seg || pcl_exec_one_supported(c, plan, &last));
}

ncclResult_t pcl_exec_prepare(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  segs_t s;
  segs_of(c, plan, a, &s);
  if (s.count == 1)
    return pcl_exec_one_prepare(c, plan, a);
  /* Every segment but the last has the first's shape: two programs cover the call. */
  pcl_exec_args_t first = seg_args(a, &s, 0), last = seg_args(a, &s, s.count - 1);
  PCL_CHECK(pcl_exec_one_prepare(c, plan, &first));
  return s.last == s.seg ? ncclSuccess : pcl_exec_one_prepare(c, plan, &last);
}

const char *pcl_exec_kernel(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  segs_t s;
  segs_of(c, plan, a, &s);
  pcl_exec_args_t first = seg_args(a, &s, 0);
  return pcl_exec_one_kernel(c, plan, s.count == 1 ? a : &first);
}

/* Each segment is an ordinary call (its own flags and end-of-call protocol), launched in order
 * on one stream: the same on every rank, since every rank computes the same segments. */
ncclResult_t pcl_exec_launch(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                             cudaStream_t stream) {
  segs_t s;
  segs_of(c, plan, a, &s);
  if (s.count == 1)
    return pcl_exec_one_launch(c, plan, a, stream);
  for (uint64_t k = 0; k < s.count; k++) {
    pcl_exec_args_t x = seg_args(a, &s, k);
    PCL_CHECK(pcl_exec_one_launch(c, plan, &x, stream));
  }
  return ncclSuccess;
}
