/* SPDX-License-Identifier: MIT
 * Simulator checking: seeded inputs chosen so reductions are exact where the dtype allows, the
 * collectives' reference definitions, result comparison (bitwise, or within the reduction-order
 * bound), the automatic size spread, and dtype/op names. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "alloc.h"
#include "plan_int.h"
#include "sim_int.h"

/* ---- Names -------------------------------------------------------------------------------- */
static const char *const k_op_names[ncclNumOps] = {"sum", "prod", "max", "min", "avg"};

const char *pcl_sim_op_name(ncclRedOp_t op) {
  return (int)op >= 0 && (int)op < ncclNumOps ? k_op_names[op] : "?";
}

int pcl_sim_op_from_name(const char *s) {
  for (int i = 0; i < ncclNumOps; i++)
    if (strcmp(s, k_op_names[i]) == 0)
      return i;
  return -1;
}

const char *pcl_sim_verdict_name(pcl_sim_verdict_t v) {
  static const char *const names[] = {"PASS", "WRONG", "DEADLOCK", "UNINIT", "ERROR", "SKIPPED"};
  return (int)v >= 0 && v <= PCL_SIM_SKIPPED ? names[v] : "?";
}

static int reduces(pcl_plan_coll_t c) {
  return c == PCL_PLAN_COLL_ALLREDUCE || c == PCL_PLAN_COLL_REDUCESCATTER ||
         c == PCL_PLAN_COLL_REDUCE;
}

int pcl_sim_plan_supports_op(const pcl_plan_t *plan, ncclRedOp_t op) {
  return pcl_plan_accepts_op(plan, (int)op); /* the one rule, shared with the executor */
}

/* ---- Inputs --------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Amplitude of float sum inputs: integers in [-A, A] keep every partial sum of n of them exact
 * when n*A <= 2^(mbits+1); beyond that (fp8 with many ranks) the check uses a bound. */
static double sum_amplitude(const sim_t *s) {
  double exact = ldexp(1.0, pcl_dtype_mbits(s->dt) + 1);
  double a = floor(exact / s->n);
  if (a > 1000)
    a = 1000;
  return a < 1 ? 1 : a;
}

/* Float inputs with random mantissas: sign x (1 + m / 2^mbits) x 2^e. Sums (and everything
 * min/max compare) use e in {-2, -1, 0}, so partial sums of up to 64 of them stay far from every
 * dtype's overflow but round; products use m < 2^mbits / n and e = 0, so a product of n of them
 * stays below e (no overflow, no underflow) and still rounds. */
static void gen_rounding(sim_t *s, uint64_t st, uint8_t *buf, uint64_t n) {
  int mb = pcl_dtype_mbits(s->dt);
  uint64_t mmax = 1ull << mb;
  if (s->op == ncclProd)
    mmax = mmax / (uint64_t)s->n ? mmax / (uint64_t)s->n : 1;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = mix(st + i), w = mix(v);
    double x = 1.0 + ldexp((double)(w % mmax), -mb);
    if (s->op != ncclProd)
      x = ldexp(x, -(int)((v >> 1) % 3));
    pcl_sim_store(s->dt, buf + i * s->es, (v & 1) ? -x : x);
  }
}

void sim_gen_input(sim_t *s, int call, int rank, uint8_t *buf, uint64_t bytes) {
  if (s->opts->input != NULL) {
    s->opts->input(s->opts->input_arg, call, rank, buf, bytes);
    return;
  }
  uint64_t st = mix(s->seed * 0x100000001b3ull ^ mix((uint64_t)call << 20 ^ (uint64_t)rank));
  int is_float = pcl_dtype_is_float(s->dt);
  int red = reduces(s->plan->collective);
  if (!red || (!is_float && s->op != ncclProd)) {
    /* Copies are compared bitwise; integer sum/min/max/avg wrap deterministically. */
    uint64_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t v = mix(st + i);
      memcpy(buf + i, &v, 8);
    }
    for (; i < bytes; i++)
      buf[i] = (uint8_t)mix(st + i);
    return;
  }
  uint64_t n = bytes / s->es;
  if (s->opts->rounding_inputs && is_float) {
    gen_rounding(s, st, buf, n);
    return;
  }
  double amp = sum_amplitude(s);
  double mm = ldexp(1.0, pcl_dtype_mbits(s->dt) + 1);
  if (mm > 1e6)
    mm = 1e6;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t v = mix(st + i);
    double x;
    if (s->op == ncclProd) {
      /* Products of +-1 and (on four ranks only) +-2, +-3 for integers: exact, no overflow. */
      int mag = (is_float ? rank < 4 : 1) ? 1 + (int)((v >> 8) % (is_float ? 2 : 3)) : 1;
      x = (v & 1) ? -mag : mag;
    } else if (s->op == ncclMax || s->op == ncclMin) {
      x = (double)((int64_t)(v % (uint64_t)(2 * mm + 1)) - (int64_t)mm);
    } else {
      x = (double)((int64_t)(v % (uint64_t)(2 * amp + 1)) - (int64_t)amp);
    }
    pcl_sim_store(s->dt, buf + i * s->es, x);
  }
}

/* ---- References and comparison --------------------------------------------------------------- */

static void ensure_reduced(sim_t *s, sim_call_t *c) {
  if (c->reduced)
    return;
  c->reduced = pcl_calloc(c->in_bytes ? c->in_bytes : 1, 1, "sim reference");
  if (!c->reduced)
    return;
  memcpy(c->reduced, c->inputs[0], c->in_bytes);
  for (int k = 1; k < s->n; k++)
    pcl_sim_reduce(s->dt, s->op, c->reduced, c->inputs[k], c->in_bytes / s->es);
  if (s->op == ncclAvg)
    pcl_sim_avg_scale(s->dt, c->reduced, c->in_bytes / s->es, s->n);
}

void sim_avg_finish(sim_t *s, sim_rank_t *r, sim_call_t *c) {
  pcl_plan_coll_t coll = s->plan->collective;
  if (s->op != ncclAvg || !reduces(coll))
    return;
  if (coll == PCL_PLAN_COLL_REDUCE && r->rank != 0)
    return;
  uint8_t *p = r->view_mem[PCL_PLAN_BUF_OUTPUT]->data + r->view_off[PCL_PLAN_BUF_OUTPUT];
  pcl_sim_avg_scale(s->dt, p, c->out_bytes / s->es, s->n);
}

/* Allowed |got - expected| for float reductions of the generated exact inputs (0 = must be
 * equal); a negative value means "bound each element from its inputs" (rounding_inputs). */
static double tolerance(const sim_t *s) {
  if (!pcl_dtype_is_float(s->dt) || !reduces(s->plan->collective))
    return 0;
  if (s->op != ncclSum && s->op != ncclAvg && s->op != ncclProd)
    return 0;
  if (s->opts->rounding_inputs)
    return -1;
  if (s->op == ncclProd)
    return 0;
  double a = sum_amplitude(s);
  if (s->n * a <= ldexp(1.0, pcl_dtype_mbits(s->dt) + 1))
    return 0;
  double tol = (s->n - 1) * pcl_sim_ulp(s->dt, s->n * a);
  if (s->op == ncclAvg)
    tol = tol / s->n + 2 * pcl_sim_ulp(s->dt, a);
  return tol;
}

/* The reordering bound of one element of rounding inputs (at byte `ref` of every rank's input):
 * a reduction of n values in any order rounds n - 1 times, each step by at most half an ulp of
 * its partial result, whose magnitude the bound M caps (sum: the sum of |x|; prod: the product
 * of |x|, as relative errors), so two orders differ by at most (n - 1) ulp(M). The factor 2 (4
 * for prod) covers partial results rounded into M's next binade (and compounding). */
static double element_bound(const sim_t *s, const sim_call_t *c, uint64_t ref) {
  double m = s->op == ncclProd ? 1 : 0;
  for (int k = 0; k < s->n; k++) {
    double x = fabs(pcl_sim_load(s->dt, c->inputs[k] + ref));
    m = s->op == ncclProd ? m * x : m + x;
  }
  double tol = 2 * (s->n - 1) * pcl_sim_ulp(s->dt, m);
  if (s->op == ncclProd)
    return 2 * tol;
  if (s->op == ncclAvg)
    tol = tol / s->n + 2 * pcl_sim_ulp(s->dt, m / s->n);
  return tol;
}

/* Compares rank r's output bytes [off, off+bytes) with exp, whose element i is the reduction of
 * the inputs' bytes at ref + i (numeric only); fails with a pointed message. */
static int compare(sim_t *s, sim_rank_t *r, sim_call_t *c, uint64_t off, const uint8_t *exp,
                   uint64_t ref, uint64_t bytes, int numeric) {
  sim_mem_t *m = r->view_mem[PCL_PLAN_BUF_OUTPUT];
  uint64_t base = r->view_off[PCL_PLAN_BUF_OUTPUT] + off;
  const uint8_t *got = m->data + base;
  double tol = numeric ? tolerance(s) : 0;
  uint64_t es = numeric ? s->es : 4;
  uint64_t bad = UINT64_MAX, nbad = 0;
  char gs[64] = "", xs[64] = "";
  for (uint64_t i = 0; i < bytes; i += es) {
    int ok;
    if (!numeric || !pcl_dtype_is_float(s->dt)) {
      ok = memcmp(got + i, exp + i, es) == 0;
    } else {
      double g = pcl_sim_load(s->dt, got + i), x = pcl_sim_load(s->dt, exp + i);
      ok = (g == x) || (isnan(g) && isnan(x)) ||
           fabs(g - x) <= (tol < 0 ? element_bound(s, c, ref + i) : tol);
    }
    uint32_t tag = m->tag[(base + i) / 4];
    if (ok && (tag >> 24) == r->ctag)
      continue;
    if (nbad++ == 0) {
      bad = i;
      if (numeric) {
        snprintf(gs, sizeof(gs), "%.9g", pcl_sim_load(s->dt, got + i));
        snprintf(xs, sizeof(xs), "%.9g", pcl_sim_load(s->dt, exp + i));
      } else {
        uint32_t gv = 0, xv = 0;
        memcpy(&gv, got + i, es < 4 ? es : 4);
        memcpy(&xv, exp + i, es < 4 ? es : 4);
        snprintf(gs, sizeof(gs), "0x%08x", gv);
        snprintf(xs, sizeof(xs), "0x%08x", xv);
      }
    }
  }
  if (nbad == 0)
    return 1;
  uint32_t tag = m->tag[(base + bad) / 4];
  char who[256];
  sim_writer_desc(s, tag, who, sizeof(who));
  sim_fail(s, PCL_SIM_WRONG,
           "wrong result: rank %d output byte %llu (element %llu): got %s, expected %s%s; %llu "
           "of %llu elements differ (size %llu, call %d, flag %u, %s/%s); that byte %s",
           r->rank, (unsigned long long)(off + bad), (unsigned long long)((off + bad) / s->es), gs,
           xs, (tag >> 24) == r->ctag ? "" : " (not written in this call)",
           (unsigned long long)nbad, (unsigned long long)(bytes / es), (unsigned long long)c->size,
           r->call, r->flag, pcl_dtype_name(s->dt), pcl_sim_op_name(s->op), who);
  return 0;
}

int sim_check_rank(sim_t *s, sim_rank_t *r, sim_call_t *c) {
  int n = s->n, rk = r->rank;
  switch (s->plan->collective) {
  case PCL_PLAN_COLL_ALLREDUCE:
    ensure_reduced(s, c);
    return c->reduced ? compare(s, r, c, 0, c->reduced, 0, c->out_bytes, 1) : 0;
  case PCL_PLAN_COLL_REDUCE:
    if (rk != 0)
      return 1;
    ensure_reduced(s, c);
    return c->reduced ? compare(s, r, c, 0, c->reduced, 0, c->out_bytes, 1) : 0;
  case PCL_PLAN_COLL_REDUCESCATTER:
    ensure_reduced(s, c);
    return c->reduced ? compare(s, r, c, 0, c->reduced + (uint64_t)rk * c->out_bytes,
                                (uint64_t)rk * c->out_bytes, c->out_bytes, 1)
                      : 0;
  case PCL_PLAN_COLL_BROADCAST:
    return compare(s, r, c, 0, c->inputs[0], 0, c->out_bytes, 0);
  case PCL_PLAN_COLL_ALLGATHER:
    for (int k = 0; k < n; k++)
      if (!compare(s, r, c, (uint64_t)k * c->in_bytes, c->inputs[k], 0, c->in_bytes, 0))
        return 0;
    return 1;
  case PCL_PLAN_COLL_ALLTOALL: {
    uint64_t blk = c->in_bytes / n;
    for (int k = 0; k < n; k++)
      if (!compare(s, r, c, (uint64_t)k * blk, c->inputs[k] + (uint64_t)rk * blk, 0, blk, 0))
        return 0;
    return 1;
  }
  default:
    return 1;
  }
}

/* ---- Automatic sizes ------------------------------------------------------------------------- */

static uint64_t lcm64(uint64_t a, uint64_t b) {
  return a / pcl_plan_gcd64(a, b) * b;
}

/* Smallest message-size step that splits into whole aligned chunks on every rank. */
static uint64_t size_granule(const pcl_plan_t *plan) {
  uint64_t g = plan->buffer_alignment ? plan->buffer_alignment : 16, n = (uint64_t)plan->n_gpus;
  for (int r = 0; r < plan->n_gpus; r++) {
    uint32_t ic = plan->gpus[r].chunks[PCL_PLAN_BUF_INPUT];
    uint32_t oc = plan->gpus[r].chunks[PCL_PLAN_BUF_OUTPUT];
    if (ic)
      g = lcm64(g, plan->buffer_alignment * (uint64_t)ic *
                       (plan->collective == PCL_PLAN_COLL_ALLGATHER ? n : 1));
    if (oc)
      g = lcm64(g, plan->buffer_alignment * (uint64_t)oc *
                       (plan->collective == PCL_PLAN_COLL_REDUCESCATTER ? n : 1));
  }
  if (plan->collective == PCL_PLAN_COLL_ALLGATHER ||
      plan->collective == PCL_PLAN_COLL_REDUCESCATTER || plan->collective == PCL_PLAN_COLL_ALLTOALL)
    g = lcm64(g, n * plan->buffer_alignment);
  return g;
}

static void add_size(const pcl_plan_t *plan, uint64_t v, uint64_t *sizes, int *cnt, int max) {
  if (*cnt >= max || v == 0 || !pcl_plan_size_runnable(plan, v))
    return;
  for (int i = 0; i < *cnt; i++)
    if (sizes[i] == v)
      return;
  sizes[(*cnt)++] = v;
}

int pcl_sim_auto_sizes(const pcl_plan_t *plan, uint64_t max_bytes, uint64_t *sizes, int max) {
  uint64_t g = size_granule(plan);
  if (max_bytes == 0) {
    max_bytes = (32ull << 20) / (uint64_t)plan->n_gpus;
    if (max_bytes > (2ull << 20))
      max_bytes = 2ull << 20;
    if (max_bytes < (64ull << 10))
      max_bytes = 64ull << 10;
  }
  uint64_t lo = plan->min_message_size > g ? (plan->min_message_size + g - 1) / g * g : g;
  uint64_t hi = plan->max_message_size < max_bytes ? plan->max_message_size : max_bytes;
  hi = hi / g * g;
  if (hi < lo)
    hi = lo; /* a range entirely above the cap still runs its lower end */
  int cnt = 0;
  add_size(plan, lo, sizes, &cnt, max);
  add_size(plan, hi, sizes, &cnt, max);
  /* Odd multiples of the granule exercise uneven tbg slices and pipeline tails. */
  uint64_t odd[] = {lo + g, 3 * g, 7 * g, 13 * g};
  for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
    if (odd[i] >= lo && odd[i] <= hi)
      add_size(plan, odd[i], sizes, &cnt, max);
  for (int i = 1; i <= 4; i++) {
    double t = (double)lo * pow((double)hi / (double)lo, i / 5.0);
    uint64_t v = (uint64_t)(t / (double)g) * g;
    if (v < lo)
      v = lo;
    if ((v / g) % 2 == 0 && v + g <= hi)
      v += g;
    add_size(plan, v, sizes, &cnt, max);
  }
  /* Ascending order: small sizes first makes failures easier to read. */
  for (int i = 1; i < cnt; i++)
    for (int j = i; j > 0 && sizes[j - 1] > sizes[j]; j--) {
      uint64_t t = sizes[j];
      sizes[j] = sizes[j - 1];
      sizes[j - 1] = t;
    }
  return cnt;
}
