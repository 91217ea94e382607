/* SPDX-License-Identifier: MIT
 * The hang report in words: what the first thread of a rank to give up (timeout or abort) waited
 * for (kernel_abi.h, pcl_khang_t), told as plan, block, op, the memory it polled, the flag it
 * wanted and found, and which peer's op writes there. Pure CPU: unit-tested without a GPU. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "exec.h"

typedef struct {
  char *buf;
  size_t len, used;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  if (o->used + 1 >= o->len)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->used = o->used + (size_t)n < o->len ? o->used + (size_t)n : o->len - 1;
}

static const char *err_name(uint32_t e) {
  switch (e) {
  case PCL_KERR_TIMEOUT:
    return "timed out";
  case PCL_KERR_ABORT:
    return "was aborted";
  case PCL_KERR_FIFO:
    return "gave up on a port-channel FIFO";
  case PCL_KERR_LAUNCH:
    return "could not be launched";
  default:
    return "failed";
  }
}

/* The op of `plan` at (rank, block, op) or NULL. */
static const pcl_plan_op_t *plan_op(const pcl_plan_t *plan, int rank, uint32_t block, uint32_t op) {
  if (plan == NULL || rank < 0 || rank >= plan->n_gpus)
    return NULL;
  const pcl_plan_gpu_t *g = &plan->gpus[rank];
  if (block >= (uint32_t)g->n_blocks || op >= (uint32_t)g->blocks[block].n_ops)
    return NULL;
  return &g->blocks[block].ops[op];
}

/* The peers an op reaches, through its channels or its remote buffers, as " over memory
 * channels with ranks 1, 2". */
static void op_peers(out_t *o, const pcl_plan_t *plan, int rank, int shift,
                     const pcl_plan_op_t *op) {
  const pcl_plan_gpu_t *g = &plan->gpus[rank];
  int peers[PCL_PLAN_MAX_OP_CHANNELS + 2 * PCL_PLAN_MAX_OP_BUFS], n = 0;
  for (int i = 0; op->channel_type < 2 && i < op->n_channels; i++) {
    int c = op->gpu_channels[i];
    if (c >= 0 && c < g->n_channels[op->channel_type])
      peers[n++] = g->channels[op->channel_type][c].peer;
  }
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < (d ? op->n_dst : op->n_src); i++) {
      const pcl_plan_ref_t *r = d ? &op->dst[i] : &op->src[i];
      if (r->kind == PCL_PLAN_REF_REMOTE)
        peers[n++] = r->rank;
    }
  int shown = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= peers[j] == peers[i];
    if (seen)
      continue;
    if (shown++ == 0)
      put(o, " over %s channels with rank",
          op->channel_type < 2 ? pcl_plan_chan_name(op->channel_type) : "no");
    put(o, "%s %d", shown > 1 ? "," : "", pcl_exec_prank(peers[i], shift, plan->n_gpus));
  }
}

/* Every op of another rank (or this one) that writes packets over [off, off + 1) of this rank's
 * scratch half: the writers the packet wait was for. Slicing by thread-block groups is not
 * applied: an op is named when its whole range covers the offset. */
static int name_writers(out_t *o, const pcl_plan_t *plan, int rank, int shift,
                        const pcl_plan_layout_t *l, uint64_t off) {
  int found = 0;
  for (int r = 0; r < plan->n_gpus; r++) {
    const pcl_plan_gpu_t *g = &plan->gpus[r];
    for (int b = 0; b < g->n_blocks; b++)
      for (int i = 0; i < g->blocks[b].n_ops; i++) {
        const pcl_plan_op_t *op = &g->blocks[b].ops[i];
        for (int d = 0; d < op->n_dst; d++) {
          const pcl_plan_ref_t *ref = &op->dst[d];
          if (ref->rank != rank || ref->type != PCL_PLAN_BUF_SCRATCH ||
              !pcl_plan_operand_is_packet(op, 1, d))
            continue;
          uint64_t lo =
              pcl_plan_chunk_offset(l, PCL_PLAN_BUF_SCRATCH, ref->index) * PCL_KABI_PKT_RATIO;
          uint64_t hi =
              lo + pcl_plan_chunk_size(l, PCL_PLAN_BUF_SCRATCH, ref->size) * PCL_KABI_PKT_RATIO;
          if (off < lo || off >= hi)
            continue;
          if (found < 3)
            put(o, "%s rank %d (block %d op %d, %s)", found ? ";" : ", written by",
                pcl_exec_prank(r, shift, plan->n_gpus), b, i,
                pcl_plan_op_name((pcl_plan_op_type_t)op->type));
          found++;
        }
      }
  }
  if (found > 3)
    put(o, " and %d more", found - 3);
  return found;
}

static void where(out_t *o, const pcl_khang_t *h, const pcl_exec_hang_where_t *w) {
  const uint64_t at = h->at;
  if (at == 0) {
    put(o, "no wait (a port-channel trigger refused by the abort)");
    return;
  }
  const uint64_t scratch_end =
      w->scratch + (w->scratch_half ? 2 * w->scratch_half : w->scratch_bytes);
  if (w->scratch != 0 && at >= w->scratch && at < scratch_end) {
    uint64_t off = at - w->scratch;
    int half = w->scratch_half != 0 && off >= w->scratch_half;
    if (half)
      off -= w->scratch_half;
    put(o, "its scratch at +%#" PRIx64 "%s", off,
        w->scratch_half ? (half ? " (odd half)" : " (even half)") : "");
    if ((h->what == PCL_KWAIT_LL16 || h->what == PCL_KWAIT_LL8) && w->plan != NULL &&
        w->layout != NULL && !name_writers(o, w->plan, w->rank, w->shift, w->layout, off))
      put(o, ", which no op of the plan writes as packets");
    return;
  }
  if (w->sems != 0 && at >= w->sems && at < w->sems + 4u * (uint64_t)w->nsems) {
    put(o, "semaphore %" PRIu64 " of the plan", (at - w->sems) / 4);
    return;
  }
  if (w->barriers != 0 && at >= w->barriers && at < w->barriers + w->barrier_bytes) {
    put(o, "a grid barrier of the context");
    return;
  }
  for (int i = 0; i < w->nports; i++) {
    if (at == w->port_tail[i]) {
      put(o,
          "the FIFO of its port channel to rank %d (the proxy has not consumed its triggers that "
          "far: a flush, or a full FIFO)",
          w->port_peer[i]);
      return;
    }
    if (at == w->port_inbound[i]) {
      put(o, "the inbound signals of its port channel from rank %d", w->port_peer[i]);
      return;
    }
  }
  put(o, "device address %#" PRIx64, at);
}

static void wanted(out_t *o, const pcl_khang_t *h) {
  switch (h->what) {
  case PCL_KWAIT_LL16:
  case PCL_KWAIT_LL8:
    put(o, ": wanted an %s packet of flag %u (the call's), found flag %u",
        h->what == PCL_KWAIT_LL16 ? "LL16" : "LL8", h->want, h->found);
    /* With double scratch a half last held the packets of two calls back. Flags run 1 ..
     * 2^32 - 1 and then start again at 1 (pcl_kflag32): distances are taken on that cycle. */
    if (h->found == 0) {
      put(o, " (nothing written there yet)");
    } else {
      const uint64_t m = 0xffffffffull;
      const uint64_t back = ((uint64_t)h->want + m - h->found) % m;
      const uint64_t ahead = ((uint64_t)h->found + m - h->want) % m;
      if (back >= 1 && back <= 2)
        put(o, " (an earlier call's: the writer has not reached this call)");
      else if (ahead >= 1 && ahead < (1ull << 31))
        put(o, " (a later call's: the ranks' calls are out of step)");
      else
        put(o, " (a stale flag)");
    }
    break;
  case PCL_KWAIT_SEM:
    put(o, ": wanted a count > 0, found %d", (int32_t)h->found);
    break;
  case PCL_KWAIT_BARRIER:
    put(o, ": generation %u still %u (not every block arrived)", h->want, h->found);
    break;
  case PCL_KWAIT_FIFO:
  case PCL_KWAIT_INBOUND:
    put(o, ": wanted position %u, found %u (low 32 bits)", h->want, h->found);
    break;
  default:
    break;
  }
}

int pcl_exec_hang_describe(const pcl_khang_t *h, const pcl_exec_hang_where_t *w, char *buf,
                           size_t len) {
  out_t o = {buf, len, 0};
  if (len == 0)
    return 0;
  buf[0] = '\0';
  if (h == NULL || h->valid != 1u)
    return 0;
  put(&o, "rank %d: a kernel %s",
      w->plan != NULL ? pcl_exec_prank(w->rank, w->shift, w->plan->n_gpus) : w->rank,
      err_name(h->err));
  if (h->waited_ns != 0)
    put(&o, " after waiting %.3f s", (double)h->waited_ns * 1e-9);
  put(&o, ": plan %s", w->plan != NULL ? w->plan->name : "(unknown program)");
  if (w->kernel != NULL)
    put(&o, " (%s)", w->kernel);
  put(&o, ", block %u, thread %u, ", h->block, h->thread);
  if (h->op == PCL_KHANG_OP_EW) {
    put(&o, "the block's fused elementwise program");
  } else {
    const pcl_plan_op_t *op = plan_op(w->plan, w->rank, h->block, h->op);
    put(&o, "op %u", h->op);
    if (op != NULL) {
      put(&o, " (%s", pcl_plan_op_name((pcl_plan_op_type_t)op->type));
      op_peers(&o, w->plan, w->rank, w->shift, op);
      put(&o, ")");
    }
  }
  put(&o, ", waiting on ");
  where(&o, h, w);
  wanted(&o, h);
  return 1;
}
