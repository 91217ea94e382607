/* SPDX-License-Identifier: MIT
 * Proves that a block's packet ops can run per element and writes the elementwise program the EW
 * kernels run (kernel_abi.h, pcl_kew_t) or, for blocks of several plain streams, the EWX
 * kernel's (pcl_kewx_t): a symbolic run of the ops over one element, then the form check. Pure
 * CPU, no CUDA. */
#include <stdio.h>
#include <string.h>
#include "exec.h"

/* The symbolic value of one element: a term t >= 0 (a packet of a peer, waited for), the block's
 * one reduction, or source k (VAL_SRC(k)): the value plain location src[k] held when the block
 * started. */
enum { VAL_RED = -2 };
#define VAL_SRC(k) (-3 - (k))
#define SRC_OF(v) (-3 - (v))

#define EW_MAX_LOCS 32

typedef struct {
  uint8_t kind; /* PCL_KBUF_INPUT / OUTPUT */
  uint32_t off;
  int val;
} plain_t;

typedef struct {
  const pcl_kblock_t *k;
  uint32_t size;            /* every range's bytes */
  plain_t src[EW_MAX_LOCS]; /* plain locations read before any write there (val unused) */
  int nsrc;
  plain_t plain[EW_MAX_LOCS]; /* plain locations written, latest value */
  int nplain;
  plain_t lpkt[EW_MAX_LOCS]; /* local packet locations written (payload offsets), their value */
  int nlpkt;
  uint32_t term_off[PCL_KEW_MAX]; /* peers' packets read, by term index */
  int nterm;
  uint64_t put[PCL_KEW_MAX][2]; /* packets sent, both scratch parities, and their values */
  int put_val[PCL_KEW_MAX];
  int nput;
  int red[PCL_KEW_MAX]; /* the reduction's operands (a source or a term) */
  int nred;
  uint8_t redop;
  uint64_t sync[PCL_KEWX_SYNCS][2]; /* semaphore ops in order (pcl_kewx_t.sync) */
  int nsync;
  uint8_t sync_wait, sync_relaxed;
  int signalled, waited; /* a signal / a wait seen: what may follow is restricted */
  uint64_t scratch, scratch_half;
  const char *why;
} fuse_t;

static int refuse(fuse_t *f, const char *why) {
  if (f->why == NULL)
    f->why = why;
  return 0;
}

static int overlaps(uint32_t a, uint32_t b, uint32_t n) {
  return a < b + n && b < a + n;
}

/* Value of plain location (kind, off) read by the current op. A location of the other user
 * buffer at the same offset may be the same memory (in-place calls of any plan), so a read
 * after a write there depends on the call: refused. */
static int read_plain(fuse_t *f, uint8_t kind, uint32_t off, int *val) {
  for (int i = f->nplain - 1; i >= 0; i--)
    if (f->plain[i].off == off) {
      if (f->plain[i].kind != kind)
        return refuse(f, "reads a user buffer after writing the other one at that offset");
      *val = f->plain[i].val;
      return 1;
    }
  for (int k = 0; k < f->nsrc; k++)
    if (f->src[k].kind == kind && f->src[k].off == off) {
      *val = VAL_SRC(k);
      return 1;
    }
  if (f->nsrc == EW_MAX_LOCS)
    return refuse(f, "too many plain ranges");
  f->src[f->nsrc].kind = kind;
  f->src[f->nsrc].off = off;
  *val = VAL_SRC(f->nsrc);
  f->nsrc++;
  return 1;
}

static int write_plain(fuse_t *f, uint8_t kind, uint32_t off, int val) {
  for (int i = 0; i < f->nplain; i++)
    if (f->plain[i].off == off) {
      if (f->plain[i].kind != kind)
        return refuse(f, "writes both user buffers at one offset");
      f->plain[i].val = val;
      return 1;
    }
  if (f->nplain == EW_MAX_LOCS)
    return refuse(f, "too many plain ranges");
  f->plain[f->nplain].kind = kind;
  f->plain[f->nplain].off = off;
  f->plain[f->nplain].val = val;
  f->nplain++;
  return 1;
}

/* Packet address of payload offset `off` of this rank's scratch, in both scratch parities. */
static void scratch_pkt_addr(const fuse_t *f, uint32_t off, uint64_t addr[2]) {
  uint64_t o = (uint64_t)off * PCL_KABI_PKT_RATIO;
  addr[0] = f->scratch + o;
  addr[1] = f->scratch + f->scratch_half + o;
}

/* Packet address of a ref in both scratch parities. */
static int pkt_addr(fuse_t *f, const pcl_kref_t *r, uint64_t addr[2]) {
  uint64_t off = (uint64_t)r->offset * PCL_KABI_PKT_RATIO;
  if (r->kind == PCL_KBUF_SCRATCH) {
    scratch_pkt_addr(f, r->offset, addr);
    return 1;
  }
  if (r->kind != PCL_KBUF_REMOTE || r->slot >= f->k->nremote)
    return refuse(f, "packets outside scratch");
  const pcl_kremote_t *rm = &f->k->remote[r->slot];
  if (rm->ptr == 0 || rm->kind != PCL_KBUF_SCRATCH)
    return refuse(f, "packets into a peer buffer that is not mapped scratch");
  addr[0] = rm->ptr + off;
  addr[1] = rm->ptr + rm->odd_half + off;
  return 1;
}

static int read_pkt(fuse_t *f, const pcl_kref_t *r, int *val) {
  if (r->kind != PCL_KBUF_SCRATCH)
    return refuse(f, "reads packets outside its own scratch");
  for (int i = 0; i < f->nlpkt; i++)
    if (f->lpkt[i].off == r->offset) {
      *val = f->lpkt[i].val; /* a source: only sources are sent as packets (write_pkt) */
      return 1;
    }
  for (int t = 0; t < f->nterm; t++)
    if (f->term_off[t] == r->offset) {
      *val = t;
      return 1;
    }
  if (f->nterm == PCL_KEW_MAX)
    return refuse(f, "waits for more packet ranges than the EW kernels take");
  f->term_off[f->nterm] = r->offset;
  *val = f->nterm++;
  return 1;
}

/* Packets of `val` into r. Only sources: the kernels send before they wait for anything. */
static int write_pkt(fuse_t *f, const pcl_kref_t *r, int val) {
  if (f->waited) /* the kernels wait last: a wait may order this send against a peer's reads */
    return refuse(f, "sends packets after a wait");
  if (val > VAL_SRC(0))
    return refuse(f, "sends packets of a value it received or reduced");
  if (r->kind == PCL_KBUF_SCRATCH) {
    for (int t = 0; t < f->nterm; t++)
      if (f->term_off[t] == r->offset)
        return refuse(f, "overwrites packets it waited for");
    if (f->nlpkt == EW_MAX_LOCS)
      return refuse(f, "too many packet ranges");
    f->lpkt[f->nlpkt].off = r->offset;
    f->lpkt[f->nlpkt].val = val;
    f->nlpkt++;
  }
  if (f->nput == PCL_KEW_MAX)
    return refuse(f, "sends to more packet ranges than the EW kernels take");
  if (!pkt_addr(f, r, f->put[f->nput]))
    return 0;
  f->put_val[f->nput++] = val;
  return 1;
}

static int plain_ref(fuse_t *f, const pcl_kref_t *r) {
  return (r->kind == PCL_KBUF_INPUT || r->kind == PCL_KBUF_OUTPUT) ? 1
                                                                   : refuse(f, "plain range "
                                                                               "outside the user "
                                                                               "buffers");
}

/* A memory-channel signal or wait. The EWX kernel runs them after both passes, in the ops'
 * order: a signal keeps its place when only semaphore ops follow it (step), and a wait moved
 * behind later local work orders nothing the peers can see (write_pkt). */
static int sync_op(fuse_t *f, const pcl_kop_t *op) {
  const int wait = op->type == PCL_KOP_WAIT || op->type == PCL_KOP_RLXWAIT;
  const int relaxed = op->type == PCL_KOP_RLXWAIT || op->type == PCL_KOP_RLXSIGNAL;
  for (int t = 0; t < op->nids; t++) {
    if (op->ids[t] >= f->k->nmem)
      return refuse(f, "a semaphore op on a channel the block lacks");
    if (f->nsync == PCL_KEWX_SYNCS)
      return refuse(f, "more semaphore ops than the EWX kernel takes");
    const pcl_kmemchan_t *mc = &f->k->mem[op->ids[t]];
    f->sync[f->nsync][0] = wait ? mc->local_inbound : mc->remote_inbound;
    f->sync[f->nsync][1] = wait ? mc->local_expected : 0;
    f->sync_wait |= (uint8_t)(wait << f->nsync);
    f->sync_relaxed |= (uint8_t)(relaxed << f->nsync);
    f->nsync++;
  }
  f->waited |= wait;
  f->signalled |= !wait;
  return 1;
}

/* One op, symbolically, with the LL kernel's operand rules (exec_ll.cuh). */
static int step(fuse_t *f, const pcl_kop_t *op) {
  const pcl_kref_t *r = &f->k->refs[op->ref_first];
  const int ns = op->nsrc, nd = op->ndst;
  int v;
  if (op->chan_type == PCL_KCHAN_PORT)
    return refuse(f, "port channel");
  const int is_sync = op->type == PCL_KOP_SIGNAL || op->type == PCL_KOP_RLXSIGNAL ||
                      op->type == PCL_KOP_WAIT || op->type == PCL_KOP_RLXWAIT;
  if (f->signalled && !is_sync && op->type != PCL_KOP_NOP)
    return refuse(f, "works after a signal");
  if (is_sync)
    return sync_op(f, op);
  switch (op->type) {
  case PCL_KOP_NOP: /* no element crosses threads, so the barrier orders nothing */
    return 1;
  case PCL_KOP_CPKT:
  case PCL_KOP_PPKT:
    if (op->type == PCL_KOP_CPKT && (ns != 1 || nd != 1))
      return refuse(f, "cpkt with several ranges");
    for (int j = 0; j < nd; j++) {
      const pcl_kref_t *s = &r[j < ns ? j : ns - 1];
      if (!plain_ref(f, s) || !read_plain(f, s->kind, s->offset, &v) ||
          !write_pkt(f, &r[ns + j], v))
        return 0;
    }
    return 1;
  case PCL_KOP_COPY:
    return plain_ref(f, &r[0]) && plain_ref(f, &r[1]) &&
           read_plain(f, r[0].kind, r[0].offset, &v) && write_plain(f, r[1].kind, r[1].offset, v);
  case PCL_KOP_UPKT:
    if (ns != 1 || nd != 1)
      return refuse(f, "upkt with several ranges");
    return plain_ref(f, &r[1]) && read_pkt(f, &r[0], &v) &&
           write_plain(f, r[1].kind, r[1].offset, v);
  case PCL_KOP_REPKT:
    if (f->nred != 0)
      return refuse(f, "two reductions");
    if (ns > PCL_KEW_MAX)
      return refuse(f, "reduces more sources than the EW kernels take");
    if (!plain_ref(f, &r[0]) || !read_plain(f, r[0].kind, r[0].offset, &v))
      return 0;
    for (int j = 0; j < ns; j++) {
      if (j > 0 && !read_pkt(f, &r[j], &v))
        return 0;
      if (v == VAL_RED)
        return refuse(f, "reduces a reduction");
      f->red[f->nred++] = v;
    }
    f->redop = op->redop;
    for (int j = 0; j < nd; j++)
      if (!plain_ref(f, &r[ns + j]) || !write_plain(f, r[ns + j].kind, r[ns + j].offset, VAL_RED))
        return 0;
    return 1;
  default:
    return refuse(f, "an op the EW kernels lack");
  }
}

/* Every range of one size, plain ranges identical or disjoint, local packet ranges identical or
 * disjoint: then element i of every range is touched only by the thread that owns element i. */
static int ranges_ok(fuse_t *f) {
  const pcl_kblock_t *k = f->k;
  int first = 1;
  for (int i = 0; i < k->nops; i++) {
    const pcl_kop_t *op = &k->ops[i];
    if (op->type == PCL_KOP_NOP)
      continue;
    for (int j = 0; j < op->nsrc + op->ndst; j++) {
      const pcl_kref_t *a = &k->refs[op->ref_first + j];
      if (first) {
        f->size = a->size;
        first = 0;
      } else if (a->size != f->size) {
        return refuse(f, "ranges of different sizes");
      }
    }
  }
  for (int i = 0; i < k->nrefs; i++)
    for (int j = i + 1; j < k->nrefs; j++) {
      const pcl_kref_t *a = &k->refs[i], *b = &k->refs[j];
      int plain_a = a->kind == PCL_KBUF_INPUT || a->kind == PCL_KBUF_OUTPUT;
      int plain_b = b->kind == PCL_KBUF_INPUT || b->kind == PCL_KBUF_OUTPUT;
      int same_space =
          (plain_a && plain_b) || (a->kind == PCL_KBUF_SCRATCH && b->kind == PCL_KBUF_SCRATCH);
      if (same_space && a->offset != b->offset && overlaps(a->offset, b->offset, f->size))
        return refuse(f, "partly overlapping ranges");
    }
  return 1;
}

/* The final state in the EW form: one source S, one plain location written, its value S, a term
 * or the reduction, and every packet waited for among the reduction's operands. */
static int finish_ew(fuse_t *f, pcl_kew_t *e) {
  memset(e, 0, sizeof(*e));
  e->bytes = f->size;
  e->s_kind = PCL_KEW_NONE;
  e->o_kind = PCL_KEW_NONE;
  e->redop = PCL_KOP_REDOP_CALL;
  if (f->nsync > 0)
    return refuse(f, "signals or waits on semaphores");
  if (f->nsrc > 1)
    return refuse(f, "reads two different plain ranges");
  if (f->nsrc == 1) {
    e->s_kind = f->src[0].kind;
    e->s_off = f->src[0].off;
  }
  for (int j = 0; j < f->nput; j++) {
    e->put[j][0] = f->put[j][0];
    e->put[j][1] = f->put[j][1];
  }
  e->nput = (uint8_t)f->nput;
  if (f->nplain > 1)
    return refuse(f, "writes more than one plain range");
  if (f->nplain == 0) {
    if (f->nterm > 0)
      return refuse(f, "waits for packets it never uses");
    return 1;
  }
  const plain_t *o = &f->plain[0];
  int ops[PCL_KEW_MAX], n = 0;
  if (o->val == VAL_RED) {
    memcpy(ops, f->red, sizeof(int) * (size_t)f->nred);
    n = f->nred;
    e->redop = f->redop;
  } else {
    ops[n++] = o->val;
  }
  uint32_t used = 0;
  for (int j = 0; j < n; j++) {
    if (ops[j] <= VAL_SRC(0)) {
      e->self_mask |= (uint8_t)(1u << j);
      continue;
    }
    used |= 1u << ops[j];
    scratch_pkt_addr(f, f->term_off[ops[j]], e->term[j]);
  }
  if (used != (1u << f->nterm) - 1u)
    return refuse(f, "waits for packets it never uses");
  e->nterm = (uint8_t)n;
  e->o_kind = o->kind;
  e->o_off = o->off;
  return 1;
}

/* The reduction of the EWX form: O, and its operands in order, a term or S (one source). */
static int ewx_reduction(fuse_t *f, const plain_t *o, pcl_kewx_t *e) {
  int s = -1;
  uint32_t used = 0;
  for (int j = 0; j < f->nred; j++) {
    const int v = f->red[j];
    if (v <= VAL_SRC(0)) {
      if (s >= 0 && s != SRC_OF(v))
        return refuse(f, "reduces two different plain ranges");
      s = SRC_OF(v);
      e->self_mask |= (uint8_t)(1u << j);
    } else {
      used |= 1u << v;
      scratch_pkt_addr(f, f->term_off[v], e->term[j]);
    }
  }
  if (s >= 0) {
    e->s_kind = f->src[s].kind;
    e->s_off = f->src[s].off;
  }
  if (used != (1u << f->nterm) - 1u)
    return refuse(f, "waits for packets it never uses");
  e->nterm = (uint8_t)f->nred;
  e->redop = f->redop;
  e->o_kind = o->kind;
  e->o_off = o->off;
  return 1;
}

/* A plain location the EWX kernel writes in its first pass, after the element's puts have read
 * their sources: a copy of source k. */
static int ewx_copy(fuse_t *f, const plain_t *d, int k, pcl_kewx_t *e) {
  if (e->ncopy == PCL_KEWX_COPIES)
    return refuse(f, "more copies than the EWX kernel takes");
  e->csrc[e->ncopy] = f->src[k].off;
  e->cdst[e->ncopy] = d->off;
  e->csrc_out |= (uint8_t)((f->src[k].kind == PCL_KBUF_OUTPUT) << e->ncopy);
  e->cdst_out |= (uint8_t)((d->kind == PCL_KBUF_OUTPUT) << e->ncopy);
  e->ncopy++;
  return 1;
}

/* A copy's destination read later in the kernel's order (another copy's source, or S in the
 * second pass) would give that read the copy's value, not the block's starting one. The two
 * user buffers may be one memory, so a location at the same offset counts, unless it is the
 * copy's own source: then the copy writes back what is there. */
static int ewx_copies_safe(fuse_t *f, const pcl_kewx_t *e) {
  for (int c = 0; c < e->ncopy; c++) {
    const uint32_t d = e->cdst[c];
    const int own_out = (e->csrc_out >> c) & 1;
    for (int k = 0; k < e->ncopy; k++)
      if (k != c && e->csrc[k] == d &&
          !(e->csrc[k] == e->csrc[c] && ((e->csrc_out >> k) & 1) == own_out))
        return refuse(f, "copies over a range another copy reads");
    if (e->s_kind != PCL_KEW_NONE && e->s_off == d &&
        !(e->s_off == e->csrc[c] && (e->s_kind == PCL_KBUF_OUTPUT) == own_out))
      return refuse(f, "copies over the range its reduction reads");
  }
  return 1;
}

/* The final state in the EWX form: puts of any sources; each plain location written holds a
 * source (a copy, or itself), a term (stored in the second pass) or the one reduction. */
static int finish_ewx(fuse_t *f, pcl_kewx_t *e) {
  memset(e, 0, sizeof(*e));
  e->bytes = f->size;
  e->s_kind = PCL_KEW_NONE;
  e->o_kind = PCL_KEW_NONE;
  e->redop = PCL_KOP_REDOP_CALL;
  for (int j = 0; j < f->nput; j++) {
    const plain_t *src = &f->src[SRC_OF(f->put_val[j])];
    e->src[j] = src->off;
    e->src_out |= (uint8_t)((src->kind == PCL_KBUF_OUTPUT) << j);
    e->put[j][0] = f->put[j][0];
    e->put[j][1] = f->put[j][1];
  }
  e->nput = (uint8_t)f->nput;
  memcpy(e->sync, f->sync, sizeof(e->sync));
  e->nsync = (uint8_t)f->nsync;
  e->sync_wait = f->sync_wait;
  e->sync_relaxed = f->sync_relaxed;
  int nred = 0;
  for (int i = 0; i < f->nplain; i++) {
    const plain_t *d = &f->plain[i];
    if (d->val == VAL_RED) {
      if (nred++ > 0)
        return refuse(f, "writes its reduction twice");
      if (!ewx_reduction(f, d, e))
        return 0;
    } else if (d->val >= 0) {
      if (e->tdst_mask & (1u << d->val))
        return refuse(f, "stores one term twice");
      e->tdst_mask |= (uint8_t)(1u << d->val);
      e->tdst[d->val] = d->off;
      e->tdst_out |= (uint8_t)((d->kind == PCL_KBUF_OUTPUT) << d->val);
    } else {
      const plain_t *src = &f->src[SRC_OF(d->val)];
      if ((src->kind != d->kind || src->off != d->off) && !ewx_copy(f, d, SRC_OF(d->val), e))
        return 0;
    }
  }
  if (nred > 0 && e->tdst_mask != 0)
    return refuse(f, "stores terms beside its reduction");
  if (!ewx_copies_safe(f, e))
    return 0;
  if (nred == 0) {
    if (e->tdst_mask != (1u << f->nterm) - 1u)
      return refuse(f, "waits for packets it never uses");
    e->nterm = (uint8_t)f->nterm;
    for (int t = 0; t < f->nterm; t++)
      scratch_pkt_addr(f, f->term_off[t], e->term[t]);
  }
  return 1;
}

/* The symbolic run of one block; 0 with f->why when it is not elementwise. */
static int fuse_run(const pcl_kblock_t *k, uint64_t scratch, uint64_t scratch_half, fuse_t *f) {
  memset(f, 0, sizeof(*f));
  f->k = k;
  f->scratch = scratch;
  f->scratch_half = scratch_half;
  int ok = ranges_ok(f);
  for (int i = 0; ok && i < k->nops; i++)
    ok = step(f, &k->ops[i]);
  return ok;
}

static void why_block(char *why, size_t why_len, int b, const fuse_t *f) {
  if (why != NULL)
    snprintf(why, why_len, "block %d: %s", b, f->why != NULL ? f->why : "not elementwise");
}

int pcl_exec_ew_build(const pcl_kblock_t *blocks, int nblocks, uint64_t scratch,
                      uint64_t scratch_half, pcl_kew_t *ew, char *why, size_t why_len) {
  int most = 0;
  fuse_t f;
  for (int b = 0; b < nblocks; b++) {
    if (!fuse_run(&blocks[b], scratch, scratch_half, &f) || !finish_ew(&f, &ew[b])) {
      why_block(why, why_len, b, &f);
      return 0;
    }
    if (ew[b].nput > most)
      most = ew[b].nput;
    if (ew[b].nterm > most)
      most = ew[b].nterm;
  }
  return most <= 2 ? 2 : most <= 4 ? 4 : 8;
}

int pcl_exec_ewx_build(const pcl_kblock_t *blocks, int nblocks, uint64_t scratch,
                       uint64_t scratch_half, pcl_kewx_t *ewx, char *why, size_t why_len) {
  int most = 0;
  fuse_t f;
  for (int b = 0; b < nblocks; b++) {
    if (!fuse_run(&blocks[b], scratch, scratch_half, &f) || !finish_ewx(&f, &ewx[b])) {
      why_block(why, why_len, b, &f);
      return 0;
    }
    if (ewx[b].nput > most)
      most = ewx[b].nput;
    if (ewx[b].nterm > most)
      most = ewx[b].nterm;
  }
  return most <= 2 ? 2 : most <= 4 ? 4 : 8;
}
