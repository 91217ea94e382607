/* SPDX-License-Identifier: MIT
 * Calls in segments: an elementwise collective whose plan would need more scratch than the
 * communicator has runs as consecutive calls of the same plan on sub-ranges of its buffers
 * (pcl_plan_segment_bytes), so scratch stays bounded whatever the message size. */
#include "exec_int.h"
#include "log.h"
#include "pcl_check.h"

typedef struct {
  uint64_t seg, count, last; /* count segments of seg bytes, the last of `last` */
} segs_t;

/* One segment (no split) unless the call is unregistered, in and out are the message's size and
 * the plan's scratch for it does not fit while a segment's does. Every planned call comes here
 * (launch included), so calls that cannot split leave before any layout is computed: a segment
 * is at least PCL_PLAN_SEGMENT_ALIGN bytes and shorter than its call. */
static void segs_of(const pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                    segs_t *s) {
  const uint64_t msg = a->in_bytes;
  s->seg = s->last = msg;
  s->count = 1;
  /* Registered buffers run zero-copy plans (no staging) on the exact pointers registered. */
  if (plan == NULL || a->ub != NULL || a->in_bytes != a->out_bytes || msg <= PCL_PLAN_SEGMENT_ALIGN)
    return;
  const uint64_t seg = pcl_plan_segment_bytes(plan, msg, pcl_exec_scratch_avail(c, plan));
  if (seg == 0 || seg >= msg)
    return; /* whole: it fits, or the per-shape checks refuse it with their own reason */
  s->seg = seg;
  s->count = (msg + seg - 1) / seg;
  s->last = msg - (s->count - 1) * seg;
}

/* Segment k of the call (the call itself when it is one segment). Buffers a rank does not pass
 * (NULL) stay NULL. */
static pcl_exec_args_t seg_args(const pcl_exec_args_t *a, const segs_t *s, uint64_t k) {
  pcl_exec_args_t x = *a;
  if (s->count == 1)
    return x;
  const uint64_t off = k * s->seg;
  x.in = a->in != NULL ? (const char *)a->in + off : NULL;
  x.out = a->out != NULL ? (char *)a->out + off : NULL;
  x.in_bytes = x.out_bytes = k + 1 == s->count ? s->last : s->seg;
  return x;
}

/* The distinct shapes among the segments: the first's, and the last's when it is shorter (the
 * ones between have the first's). Returns how many (1 or 2). */
static int seg_shapes(const pcl_exec_args_t *a, const segs_t *s, pcl_exec_args_t x[2]) {
  x[0] = seg_args(a, s, 0);
  x[1] = seg_args(a, s, s->count - 1);
  return s->last == s->seg ? 1 : 2;
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
  pcl_exec_args_t x[2];
  segs_of(c, plan, a, &s);
  int ok = 1;
  for (int i = 0, n = seg_shapes(a, &s, x); i < n && ok; i++)
    ok = pcl_exec_one_supported(c, plan, &x[i]);
  return ok;
}

/* Two programs at most cover a segmented call. */
ncclResult_t pcl_exec_prepare(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  segs_t s;
  pcl_exec_args_t x[2];
  segs_of(c, plan, a, &s);
  for (int i = 0, n = seg_shapes(a, &s, x); i < n; i++)
    PCL_CHECK(pcl_exec_one_prepare(c, plan, &x[i]));
  return ncclSuccess;
}

const char *pcl_exec_kernel(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  segs_t s;
  segs_of(c, plan, a, &s);
  pcl_exec_args_t first = seg_args(a, &s, 0);
  return pcl_exec_one_kernel(c, plan, &first);
}

/* Each segment is an ordinary call (its own flags and end-of-call protocol), launched in order
 * on one stream: the same on every rank, since every rank computes the same segments. */
ncclResult_t pcl_exec_launch(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                             cudaStream_t stream) {
  segs_t s;
  segs_of(c, plan, a, &s);
  ncclResult_t ord = pcl_exec_order(c, stream);
  if (ord != ncclSuccess) {
    pcl_exec_fail(c); /* nothing launched here, the peers launch theirs */
    return ord;
  }
  for (uint64_t k = 0; k < s.count; k++) {
    pcl_exec_args_t x = seg_args(a, &s, k);
    ncclResult_t res = pcl_exec_one_launch(c, plan, &x, stream);
    if (res != ncclSuccess) {
      /* The peers launched theirs: this rank's next kernels would pair with the peers' current
       * ones (wrong data, not a hang). The context stops for good (pcl_exec_fail). */
      PCL_WARN(PCL_LOG_EXEC,
               "rank %d: %s call (segment %llu of %llu) failed to launch: planned calls on this "
               "communicator are stopped",
               pcl_exec_ctx_cfg(c)->rank, plan->name, (unsigned long long)k + 1,
               (unsigned long long)s.count);
      pcl_exec_fail(c);
      return res;
    }
  }
  ncclResult_t rec = pcl_exec_ordered(c, stream);
  if (rec != ncclSuccess)
    pcl_exec_fail(c); /* launched, but the next call on another stream could overlap it */
  return rec;
}
