/* SPDX-License-Identifier: MIT
 * Simulator op semantics: resolves an op's operands for the current call (chunks, tbg slice,
 * pipeline window, scratch half, packet space) and executes it in bounded steps that may block
 * (packet flag, semaphore, barrier, flush), so the scheduler can interleave blocks and ranks. */
#include <stdio.h>
#include <string.h>
#include "sim_int.h"

static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline void wr32(uint8_t *p, uint32_t v) {
  memcpy(p, &v, 4);
}
static inline uint64_t umin(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

static const char *buf_word(int t) {
  return t == PCL_PLAN_BUF_INPUT ? "input" : t == PCL_PLAN_BUF_OUTPUT ? "output" : "scratch";
}

/* Fails with "path (name): text". */
static int op_fail(sim_t *s, pcl_sim_verdict_t v, int rank, int b, int flat, const char *text) {
  char path[192];
  sim_op_path(s, rank, b, flat, path, sizeof(path));
  sim_fail(s, v, "%s: %s", path, text);
  return SIM_OP_FAILED;
}

/* ---- Operands --------------------------------------------------------------------------- */

static uint32_t wid_of(const sim_t *s, int rank, int b, int flat) {
  return (uint32_t)(s->gop_base[rank * s->plan->max_blocks + b] + flat + 1);
}

static int resolve(sim_t *s, sim_rank_t *r, int b, const pcl_plan_op_t *op, int flat,
                   const pcl_plan_ref_t *ref, int packet, sim_operand_t *o) {
  const pcl_plan_layout_t *l = &r->layout;
  sim_block_t *k = &r->blocks[b];
  char text[256];
  if (ref->kind == PCL_PLAN_REF_SWITCH)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "switch (NVLS) buffers are not supported");
  uint64_t off = pcl_plan_chunk_offset(l, ref->type, ref->index);
  uint64_t bytes = pcl_plan_chunk_size(l, ref->type, ref->size);
  if (op->tbg_size > 1) {
    uint64_t so, sl;
    pcl_plan_tbg_slice(bytes, l->align, op->tbg_id, op->tbg_size, &so, &sl);
    off += so;
    bytes = sl;
  }
  if (k->in_pipe) {
    const pcl_plan_op_t *pipe = &r->gpu->blocks[b].ops[k->pc];
    uint64_t w = k->pipe_iter * pipe->unit_size;
    if (ref->type == PCL_PLAN_BUF_SCRATCH && s->plan->reuse_resources && l->chunk_bytes)
      off += w % l->chunk_bytes;
    else
      off += umin(w, bytes);
    bytes = bytes > w ? umin(bytes - w, pipe->unit_size) : 0;
  }
  int owner = ref->kind == PCL_PLAN_REF_REMOTE ? ref->rank : r->rank;
  if (owner < 0 || owner >= s->n)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "operand names no rank");
  sim_rank_t *ow = &s->ranks[owner];
  o->owner = owner;
  o->type = ref->type;
  o->packet = packet;
  o->remote = ref->kind == PCL_PLAN_REF_REMOTE;
  o->off = off;
  o->bytes = bytes;
  if (packet && ref->type != PCL_PLAN_BUF_SCRATCH) {
    snprintf(text, sizeof(text), "packets must live in scratch, operand is rank %d's %s", owner,
             buf_word(ref->type));
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
  }
  if ((off | bytes) & 3) {
    snprintf(text, sizeof(text), "operand range [%llu, +%llu) of rank %d's %s is not 4-aligned",
             (unsigned long long)off, (unsigned long long)bytes, owner, buf_word(ref->type));
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
  }
  /* Limits from this call's sizes (the owner's own layout may already be another call's). */
  sim_call_t *c = &s->calls[r->call];
  uint64_t limit;
  if (ref->type == PCL_PLAN_BUF_INPUT)
    limit = c->in_bytes;
  else if (ref->type == PCL_PLAN_BUF_OUTPUT)
    limit = c->out_bytes;
  else
    limit = (uint64_t)ow->gpu->chunks[PCL_PLAN_BUF_SCRATCH] * l->chunk_bytes *
            (s->plan->protocol == PCL_PLAN_PROTO_LL ? 2 : 1);
  uint64_t end = packet ? 2 * (off + bytes) : off + bytes;
  if (end > limit) {
    snprintf(text, sizeof(text), "operand [%llu, +%llu)%s is outside rank %d's %s (%llu bytes)",
             (unsigned long long)(packet ? 2 * off : off),
             (unsigned long long)(packet ? 2 * bytes : bytes), packet ? " (packet space)" : "",
             owner, buf_word(ref->type), (unsigned long long)limit);
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
  }
  o->mem = ow->view_mem[ref->type];
  o->abs = ow->view_off[ref->type] + (packet ? 2 * off : off);
  if (ref->type == PCL_PLAN_BUF_SCRATCH && s->plan->use_double_scratch_buffer)
    o->abs += (uint64_t)(r->flag & 1) * s->half;
  return SIM_OP_DONE;
}

static int op_start(sim_t *s, sim_rank_t *r, int b, const pcl_plan_op_t *op, int flat) {
  sim_block_t *k = &r->blocks[b];
  k->nsrc = op->n_src;
  k->ndst = op->n_dst;
  k->pos = 0;
  k->phase = 0;
  k->len = 0;
  for (int i = 0; i < op->n_src; i++)
    if (resolve(s, r, b, op, flat, &op->src[i], pcl_plan_operand_is_packet(op, 0, i), &k->src[i]))
      return SIM_OP_FAILED;
  for (int i = 0; i < op->n_dst; i++)
    if (resolve(s, r, b, op, flat, &op->dst[i], pcl_plan_operand_is_packet(op, 1, i), &k->dst[i]))
      return SIM_OP_FAILED;
  if (op->n_src + op->n_dst > 0) {
    k->len = op->n_src ? k->src[0].bytes : k->dst[0].bytes;
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
      const sim_operand_t *o = i < op->n_src ? &k->src[i] : &k->dst[i - op->n_src];
      if (o->bytes != k->len) {
        char text[200];
        snprintf(text, sizeof(text), "%s[%d] covers %llu bytes but the op moves %llu",
                 i < op->n_src ? "src_buff" : "dst_buff", i < op->n_src ? i : i - op->n_src,
                 (unsigned long long)o->bytes, (unsigned long long)k->len);
        return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
      }
    }
  }
  k->started = 1;
  return SIM_OP_DONE;
}

/* ---- Data movement -------------------------------------------------------------------- */

/* Payload bytes from `pos` that are valid packets (flag == this call's flag), up to n. */
static uint64_t packets_valid(sim_t *s, sim_rank_t *r, sim_block_t *k, const sim_operand_t *o,
                              uint64_t pos, uint64_t n) {
  const uint8_t *base = o->mem->data + o->abs + 2 * pos;
  uint32_t want = r->flag;
  uint64_t np = n / s->P;
  for (uint64_t j = 0; j < np; j++) {
    const uint8_t *p = base + j * 2 * s->P;
    uint32_t f1 = rd32(p + 4), f2 = s->P == 8 ? rd32(p + 12) : f1;
    if (f1 != want || f2 != want) {
      uint32_t f = f1 != want ? f1 : f2;
      snprintf(k->why, sizeof(k->why),
               "waits for a packet with flag %u at payload byte %llu of rank %d's scratch "
               "(found flag %u%s)",
               want, (unsigned long long)(o->off + pos + j * s->P), o->owner, f,
               f == 0     ? ": never written"
               : f > want ? ": from a later call"
                          : ": stale, from an earlier call");
      return j * s->P;
    }
  }
  return np * s->P;
}

static void gather(sim_t *s, const sim_operand_t *o, uint64_t pos, uint64_t n, uint8_t *out) {
  if (!o->packet) {
    memcpy(out, o->mem->data + o->abs + pos, n);
    return;
  }
  const uint8_t *p = o->mem->data + o->abs + 2 * pos;
  if (s->P == 8) {
    for (uint64_t j = 0; j < n; j += 8, p += 16) {
      memcpy(out + j, p, 4);
      memcpy(out + j + 4, p + 8, 4);
    }
  } else {
    for (uint64_t j = 0; j < n; j += 4, p += 8)
      memcpy(out + j, p, 4);
  }
}

static void scatter(sim_t *s, sim_rank_t *r, const sim_operand_t *o, uint64_t pos, uint64_t n,
                    const uint8_t *in, uint32_t tag) {
  uint64_t a = o->abs + (o->packet ? 2 * pos : pos), bytes = o->packet ? 2 * n : n;
  uint8_t *p = o->mem->data + a;
  if (!o->packet) {
    memmove(p, in, n);
  } else if (s->P == 8) {
    for (uint64_t j = 0; j < n; j += 8, p += 16) {
      memcpy(p, in + j, 4);
      wr32(p + 4, r->flag);
      memcpy(p + 8, in + j + 4, 4);
      wr32(p + 12, r->flag);
    }
  } else {
    for (uint64_t j = 0; j < n; j += 4, p += 8) {
      memcpy(p, in + j, 4);
      wr32(p + 4, r->flag);
    }
  }
  uint32_t *t = o->mem->tag + a / 4;
  for (uint64_t w = 0; w < bytes / 4; w++)
    t[w] = tag;
}

/* Plain reads must see bytes written in the reader's call. */
static int check_written(sim_t *s, sim_rank_t *r, int b, int flat, const sim_operand_t *o,
                         uint64_t pos, uint64_t n) {
  const uint32_t *t = o->mem->tag + (o->abs + pos) / 4;
  for (uint64_t w = 0; w < n / 4; w++) {
    if ((t[w] >> 24) == r->ctag)
      continue;
    char who[256], text[640];
    sim_writer_desc(s, t[w], who, sizeof(who));
    snprintf(text, sizeof(text), "reads byte %llu of rank %d's %s, which %s (call %d, flag %u)",
             (unsigned long long)(o->off + pos + 4 * w), o->owner, buf_word(o->type), who, r->call,
             r->flag);
    return op_fail(s, PCL_SIM_UNINIT, r->rank, b, flat, text);
  }
  return SIM_OP_DONE;
}

/* Moves [pos, len) from the sources (combined with `rop` when reduce) into every destination,
 * at most `budget` bytes; waits at the first packet that is not there yet. */
static int xfer(sim_t *s, sim_rank_t *r, int b, int flat, const sim_operand_t *src, int nsrc,
                int reduce, ncclRedOp_t rop, const sim_operand_t *dst, int ndst, uint64_t budget,
                uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  uint64_t unit = reduce && s->es > 4 ? s->es : 4;
  for (int i = 0; i < nsrc; i++)
    if (src[i].packet && unit < s->P)
      unit = s->P;
  for (int i = 0; i < ndst; i++)
    if (dst[i].packet && unit < s->P)
      unit = s->P;
  if (k->len % unit) {
    char text[160];
    snprintf(text, sizeof(text),
             "moves %llu bytes, not a multiple of %llu (packet payload / "
             "element size)",
             (unsigned long long)k->len, (unsigned long long)unit);
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
  }
  uint32_t tag = (r->ctag << 24) | wid_of(s, r->rank, b, flat);
  while (k->pos < k->len) {
    if (budget<unit && * used> 0)
      return SIM_OP_MORE;
    uint64_t n = umin(umin(k->len - k->pos, SIM_STEP_MAX), budget < unit ? unit : budget);
    n -= n % unit;
    for (int i = 0; i < nsrc; i++) {
      if (!src[i].packet)
        continue;
      uint64_t v = packets_valid(s, r, k, &src[i], k->pos, n);
      if (v < n)
        n = v - v % unit;
      if (n == 0)
        return SIM_OP_BLOCKED;
    }
    for (int i = 0; i < nsrc; i++)
      if (!src[i].packet && check_written(s, r, b, flat, &src[i], k->pos, n))
        return SIM_OP_FAILED;
    if (nsrc > 0) {
      gather(s, &src[0], k->pos, n, s->tmp_acc);
      for (int i = 1; i < nsrc && reduce; i++) {
        gather(s, &src[i], k->pos, n, s->tmp_src);
        pcl_sim_reduce(s->dt, rop, s->tmp_acc, s->tmp_src, n / s->es);
      }
      for (int i = 0; i < ndst; i++)
        scatter(s, r, &dst[i], k->pos, n, s->tmp_acc, tag);
    }
    k->pos += n;
    *used += n;
    budget = budget > n ? budget - n : 0;
  }
  return SIM_OP_DONE;
}

/* ---- Control ops ------------------------------------------------------------------------- */

static int chan_of(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op, int i,
                   const pcl_plan_channel_t **ch) {
  int t = op->channel_type;
  if ((t != PCL_PLAN_CHAN_MEMORY && t != PCL_PLAN_CHAN_PORT) || i >= op->n_channels)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat,
                   "needs a memory or port channel for each of its transfers");
  int g = op->gpu_channels[i];
  if (g < 0 || g >= r->gpu->n_channels[t])
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "channel index out of range");
  *ch = &r->gpu->channels[t][g];
  return SIM_OP_DONE;
}

static int do_signal(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  for (; k->phase < op->n_channels; k->phase++) {
    const pcl_plan_channel_t *ch;
    if (chan_of(s, r, b, flat, op, k->phase, &ch))
      return SIM_OP_FAILED;
    if (op->channel_type == PCL_PLAN_CHAN_MEMORY) {
      /* Release semantics: every write of this block so far is already in place (the
       * simulator's writes are immediate), so bumping the counter publishes them. */
      s->ranks[ch->peer].inbound[PCL_PLAN_CHAN_MEMORY][ch->peer_channel]++;
    } else {
      sim_trigger_t t = {0};
      t.kind = SIM_TRIG_FLAG;
      t.sig_rank = ch->peer;
      t.sig_chan = ch->peer_channel;
      t.wid = wid_of(s, r->rank, b, flat);
      if (!sim_proxy_push(s, r, &t)) {
        snprintf(k->why, sizeof(k->why), "waits for room in the proxy FIFO");
        return SIM_OP_BLOCKED;
      }
    }
  }
  return SIM_OP_DONE;
}

static int do_wait(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  int t = op->channel_type;
  if (k->phase == 0) {
    for (int i = 0; i < op->n_channels; i++) {
      const pcl_plan_channel_t *ch;
      if (chan_of(s, r, b, flat, op, i, &ch))
        return SIM_OP_FAILED;
      k->target[i] = ++r->expected[t][op->gpu_channels[i]];
    }
    k->phase = 1;
  }
  for (int i = 0; i < op->n_channels; i++) {
    int g = op->gpu_channels[i];
    if (r->inbound[t][g] < k->target[i]) {
      snprintf(k->why, sizeof(k->why),
               "waits on %s channel %d (peer %d): %llu signal(s) arrived, needs %llu",
               pcl_plan_chan_name(t), g, r->gpu->channels[t][g].peer,
               (unsigned long long)r->inbound[t][g], (unsigned long long)k->target[i]);
      return SIM_OP_BLOCKED;
    }
  }
  return SIM_OP_DONE;
}

/* Waits until the proxy completed every trigger up to FIFO position target[0]. */
static int wait_flushed(sim_t *s, sim_rank_t *r, int b) {
  sim_block_t *k = &r->blocks[b];
  if (r->proxy.tail >= k->target[0])
    return SIM_OP_DONE;
  snprintf(k->why, sizeof(k->why), "waits for the proxy to flush (done %llu of %llu requests)",
           (unsigned long long)r->proxy.tail, (unsigned long long)k->target[0]);
  return SIM_OP_BLOCKED;
}

static int do_flush(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  if (op->channel_type != PCL_PLAN_CHAN_PORT)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "flush needs port channels");
  for (; k->phase < op->n_channels; k->phase++) {
    sim_trigger_t t = {0};
    t.kind = SIM_TRIG_SYNC;
    t.wid = wid_of(s, r->rank, b, flat);
    if (!sim_proxy_push(s, r, &t)) {
      snprintf(k->why, sizeof(k->why), "waits for room in the proxy FIFO");
      return SIM_OP_BLOCKED;
    }
    k->target[0] = r->proxy.head;
  }
  if (op->n_channels == 0)
    return SIM_OP_DONE;
  return wait_flushed(s, r, b);
}

/* Port-channel transfers: one trigger per destination (channel i serves dst i). phase counts
 * pushed triggers; `first` is the first destination index, `src` the source for all of them
 * (NULL: src[min(i, nsrc-1)]). */
static int port_push(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op, int first,
                     const sim_operand_t *src, uint8_t kind, int base_phase) {
  sim_block_t *k = &r->blocks[b];
  for (int i = first + (k->phase - base_phase); i < k->ndst; i++, k->phase++) {
    const pcl_plan_channel_t *ch;
    if (chan_of(s, r, b, flat, op, i - first, &ch))
      return SIM_OP_FAILED;
    const sim_operand_t *so = src ? src : &k->src[i < k->nsrc ? i : k->nsrc - 1];
    const sim_operand_t *d = &k->dst[i];
    if (!d->remote || d->owner != ch->peer) {
      char text[160];
      snprintf(text, sizeof(text), "dst_buff[%d] is not a buffer of the channel's peer %d", i,
               ch->peer);
      return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
    }
    sim_trigger_t t = {0};
    t.kind = kind;
    t.src_mem = so->mem;
    t.src_abs = so->abs;
    t.dst_mem = d->mem;
    t.dst_abs = d->abs;
    t.bytes = so->packet ? 2 * k->len : k->len;
    t.sig_rank = ch->peer;
    t.sig_chan = ch->peer_channel;
    t.ctag = r->ctag;
    t.wid = wid_of(s, r->rank, b, flat);
    if (!sim_proxy_push(s, r, &t)) {
      snprintf(k->why, sizeof(k->why), "waits for room in the proxy FIFO");
      return SIM_OP_BLOCKED;
    }
    k->target[0] = r->proxy.head;
  }
  return SIM_OP_DONE;
}

static int do_barrier(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  int id = op->barrier_id;
  if (id < 0 || id >= PCL_PLAN_MAX_BARRIERS || op->num_threadblocks == 0)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "barrier without a valid barrier_id");
  if (k->phase == 0) {
    r->bar_arrivals[id]++;
    k->bar_passes[id]++;
    k->target[0] = k->bar_passes[id] * op->num_threadblocks;
    k->phase = 1;
  }
  if (r->bar_arrivals[id] >= k->target[0])
    return SIM_OP_DONE;
  snprintf(k->why, sizeof(k->why), "waits at barrier %d: %llu of %u blocks arrived", id,
           (unsigned long long)(r->bar_arrivals[id] - (k->target[0] - op->num_threadblocks)),
           op->num_threadblocks);
  return SIM_OP_BLOCKED;
}

static int do_sem(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  for (; k->phase < op->n_sems; k->phase++) {
    int id = op->sem_ids[k->phase];
    if (id >= r->gpu->n_sems)
      return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "semaphore id out of range");
    if (op->type == PCL_PLAN_OP_SEM_RELEASE) {
      r->sems[id]++;
    } else if (r->sems[id] > 0) {
      r->sems[id]--;
    } else {
      snprintf(k->why, sizeof(k->why), "waits to acquire device semaphore %d (value %lld)", id,
               (long long)r->sems[id]);
      return SIM_OP_BLOCKED;
    }
  }
  return SIM_OP_DONE;
}

static ncclRedOp_t red_of(const sim_t *s, const pcl_plan_op_t *op) {
  if (s->opts->call_op_everywhere || op->reduce_op == PCL_PLAN_RED_NONE ||
      op->reduce_op == PCL_PLAN_RED_AVG)
    return s->op == ncclAvg ? ncclSum : s->op;
  return (ncclRedOp_t)op->reduce_op;
}

/* put, pws, pwsf and ppkt over a port channel: one proxy trigger per destination (pws and pwsf
 * raise the peer's flag, pwsf then waits until the proxy has flushed). */
static int port_put(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  sim_block_t *k = &r->blocks[b];
  if (op->type == PCL_PLAN_OP_GET)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "needs a memory channel");
  if (op->type == PCL_PLAN_OP_PPKT && k->src[0].type != PCL_PLAN_BUF_SCRATCH)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat,
                   "a port-channel ppkt copies packets: its source must be scratch");
  uint8_t kind = SIM_TRIG_DATA;
  if (op->type == PCL_PLAN_OP_PWS)
    kind |= SIM_TRIG_FLAG;
  if (op->type == PCL_PLAN_OP_PWSF)
    kind |= SIM_TRIG_FLAG | SIM_TRIG_SYNC;
  if (k->phase < k->ndst) {
    int rc = port_push(s, r, b, flat, op, 0, NULL, kind, 0);
    if (rc != SIM_OP_DONE)
      return rc;
  }
  return op->type == PCL_PLAN_OP_PWSF ? wait_flushed(s, r, b) : SIM_OP_DONE;
}

/* get, put and ppkt over a memory channel: pairwise phases, the block's threads copy directly
 * (a get pairs each source with a destination, the others each destination with a source). */
static int mem_put(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op,
                   ncclRedOp_t rop, uint64_t budget, uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  while (k->phase < (op->type == PCL_PLAN_OP_GET ? k->nsrc : k->ndst)) {
    int i = k->phase;
    const sim_operand_t *so = &k->src[i < k->nsrc ? i : k->nsrc - 1];
    int rc = xfer(s, r, b, flat, so, 1, 0, rop, &k->dst[i < k->ndst ? i : k->ndst - 1], 1,
                  budget > *used ? budget - *used : 0, used);
    if (rc != SIM_OP_DONE)
      return rc;
    k->phase++;
    k->pos = 0;
  }
  return SIM_OP_DONE;
}

/* The data movers get, put, pws, pwsf and ppkt: pws and pwsf exist on port channels only. */
static int do_put(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op,
                  ncclRedOp_t rop, uint64_t budget, uint64_t *used) {
  int port = op->channel_type == PCL_PLAN_CHAN_PORT;
  if (port)
    return port_put(s, r, b, flat, op);
  if (op->type == PCL_PLAN_OP_PWS || op->type == PCL_PLAN_OP_PWSF)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, "needs a memory channel");
  return mem_put(s, r, b, flat, op, rop, budget, used);
}

/* rppkt: over memory channels the block copies its packets to every destination; over a port
 * channel it waits for every packet first, then the proxy copies them. */
static int do_rppkt(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op,
                    ncclRedOp_t rop, uint64_t budget, uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  if (op->channel_type != PCL_PLAN_CHAN_PORT)
    return xfer(s, r, b, flat, k->src, 1, 0, rop, k->dst, k->ndst, budget, used);
  if (k->phase == 0) {
    int rc = xfer(s, r, b, flat, k->src, 1, 0, rop, NULL, 0, budget, used);
    if (rc != SIM_OP_DONE)
      return rc;
    k->phase = 1;
  }
  return port_push(s, r, b, flat, op, 0, &k->src[0], SIM_TRIG_DATA, 1);
}

/* The reductions other than recspkt; those that write remote results need memory channels. */
static int do_reduce(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op,
                     ncclRedOp_t rop, uint64_t budget, uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  if (op->channel_type == PCL_PLAN_CHAN_PORT && op->type != PCL_PLAN_OP_RE &&
      op->type != PCL_PLAN_OP_RRE && op->type != PCL_PLAN_OP_REPKT &&
      op->type != PCL_PLAN_OP_RECPKT)
    return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat,
                   "writes remote results directly: needs memory channels");
  return xfer(s, r, b, flat, k->src, k->nsrc, 1, rop, k->dst, k->ndst, budget, used);
}

/* recspkt: over memory channels a reduction like the others. Port flavour: reduce into dst[0]
 * and the local packet copy dst[1], then the proxy puts dst[1]'s packets to every remote
 * scratch dst[2..]. */
static int do_recspkt(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op,
                      ncclRedOp_t rop, uint64_t budget, uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  if (op->channel_type != PCL_PLAN_CHAN_PORT)
    return xfer(s, r, b, flat, k->src, k->nsrc, 1, rop, k->dst, k->ndst, budget, used);
  if (k->phase == 0) {
    int nd = k->ndst < 2 ? k->ndst : 2;
    int rc = xfer(s, r, b, flat, k->src, k->nsrc, 1, rop, k->dst, nd, budget, used);
    if (rc != SIM_OP_DONE)
      return rc;
    k->phase = 1;
  }
  if (k->ndst < 2)
    return SIM_OP_DONE;
  return port_push(s, r, b, flat, op, 2, &k->dst[1], SIM_TRIG_DATA, 1);
}

/* An op the simulator has no semantics for (the NVLS ones) fails the run. */
static int unsupported(sim_t *s, sim_rank_t *r, int b, int flat, const pcl_plan_op_t *op) {
  char text[96];
  snprintf(text, sizeof(text), "op '%s' is not supported (NVLS ops are refused)",
           pcl_plan_op_name((pcl_plan_op_type_t)op->type));
  return op_fail(s, PCL_SIM_ERROR, r->rank, b, flat, text);
}

/* ---- Dispatch -------------------------------------------------------------------------- */

int sim_op_exec(sim_t *s, sim_rank_t *r, int b, const pcl_plan_op_t *op, int flat, uint64_t budget,
                uint64_t *used) {
  sim_block_t *k = &r->blocks[b];
  *used = 0;
  if (!k->started && op_start(s, r, b, op, flat))
    return SIM_OP_FAILED;
  k->why[0] = 0;
  ncclRedOp_t rop = red_of(s, op);
  switch (op->type) {
  case PCL_PLAN_OP_NOP:
    return SIM_OP_DONE;
  case PCL_PLAN_OP_BARRIER:
    return do_barrier(s, r, b, flat, op);
  case PCL_PLAN_OP_SIGNAL:
  case PCL_PLAN_OP_RLXSIGNAL:
    return do_signal(s, r, b, flat, op);
  case PCL_PLAN_OP_WAIT:
  case PCL_PLAN_OP_RLXWAIT:
    return do_wait(s, r, b, flat, op);
  case PCL_PLAN_OP_FLUSH:
    return do_flush(s, r, b, flat, op);
  case PCL_PLAN_OP_SEM_ACQUIRE:
  case PCL_PLAN_OP_SEM_RELEASE:
    return do_sem(s, r, b, flat, op);
  case PCL_PLAN_OP_COPY:
  case PCL_PLAN_OP_CPKT:
  case PCL_PLAN_OP_UPKT:
    return xfer(s, r, b, flat, k->src, 1, 0, rop, k->dst, 1, budget, used);
  case PCL_PLAN_OP_GET:
  case PCL_PLAN_OP_PUT:
  case PCL_PLAN_OP_PWS:
  case PCL_PLAN_OP_PWSF:
  case PCL_PLAN_OP_PPKT:
    return do_put(s, r, b, flat, op, rop, budget, used);
  case PCL_PLAN_OP_RPPKT:
    return do_rppkt(s, r, b, flat, op, rop, budget, used);
  case PCL_PLAN_OP_RE:
  case PCL_PLAN_OP_RES:
  case PCL_PLAN_OP_RRE:
  case PCL_PLAN_OP_RRES:
  case PCL_PLAN_OP_REPKT:
  case PCL_PLAN_OP_RESPKT:
  case PCL_PLAN_OP_RECPKT:
    return do_reduce(s, r, b, flat, op, rop, budget, used);
  case PCL_PLAN_OP_RECSPKT:
    return do_recspkt(s, r, b, flat, op, rop, budget, used);
  default:
    return unsupported(s, r, b, flat, op);
  }
}
