/* SPDX-License-Identifier: MIT
 * Sizes, bus bandwidth and result checking of planccl-bench's calls (bench_check.h): host-side
 * and CUDA-free, so the unit tests cover every collective, data type and op. */
#include "bench_check.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

int bench_case(bench_coll_t coll, bench_dtype_t dtype, bench_op_t op, int nranks, int root,
               size_t size, bench_case_t *k) {
  size_t es = bench_dtype_size(dtype), n = (size_t)nranks;
  size_t elems = es ? size / es : 0;
  *k = (bench_case_t){.coll = coll, .dtype = dtype, .op = op, .nranks = nranks, .root = root};
  switch (coll) {
  case BENCH_ALLGATHER:
  case BENCH_REDUCESCATTER:
  case BENCH_ALLTOALL:
    k->count = elems / n;
    k->in_elems = coll == BENCH_ALLGATHER ? k->count : k->count * n;
    k->out_elems = coll == BENCH_REDUCESCATTER ? k->count : k->count * n;
    k->bytes = k->count * n * es;
    break;
  default:
    k->count = k->in_elems = k->out_elems = elems;
    k->bytes = elems * es;
    break;
  }
  return k->count > 0 ? 0 : -1;
}

double bench_busbw_factor(bench_coll_t coll, int nranks) {
  double n = nranks;
  switch (coll) {
  case BENCH_ALLREDUCE:
    return 2 * (n - 1) / n;
  case BENCH_ALLGATHER:
  case BENCH_REDUCESCATTER:
  case BENCH_ALLTOALL:
    return (n - 1) / n;
  default: /* broadcast, reduce, send/recv */
    return 1;
  }
}

double bench_algbw(size_t bytes, double us) {
  return us > 0 ? (double)bytes / us / 1e3 : 0;
}

void bench_inplace_offsets(const bench_case_t *k, int rank, size_t *in_off, size_t *out_off) {
  *in_off = k->coll == BENCH_ALLGATHER ? (size_t)rank * k->count : 0;
  *out_off = k->coll == BENCH_REDUCESCATTER ? (size_t)rank * k->count : 0;
}

/* The largest n such that every integer in [0, n] is exact in `t` (sums stay below it). */
static int exact_limit(bench_dtype_t t) {
  switch (t) {
  case BENCH_INT8:
    return 127;
  case BENCH_UINT8:
    return 255;
  case BENCH_HALF:
    return 2048;
  case BENCH_BFLOAT16:
    return 256;
  case BENCH_FP8E4M3:
    return 16;
  case BENCH_FP8E5M2:
    return 8;
  default:
    return 1 << 20;
  }
}

/* Element i of rank r's input. Reductions over n ranks never leave the exact range: sums of
 * values below limit/n + 1, products of at most ceil(n/3) twos. Data-moving collectives use
 * values that differ between ranks, so a block from the wrong peer is seen. */
static double pattern(const bench_case_t *k, int r, size_t i) {
  int lim = exact_limit(k->dtype);
  if (!bench_coll_has_op(k->coll)) {
    int m = lim + 1 < 31 ? lim + 1 : 31;
    return (double)(((size_t)r * 5 + i) % (size_t)m);
  }
  switch (k->op) {
  case BENCH_PROD:
    return ((size_t)r + i) % 3 == 0 ? 2 : 1;
  case BENCH_MAX:
  case BENCH_MIN:
    return (double)(((size_t)r * 3 + i) % 7);
  default: { /* sum, avg */
    int m = lim / k->nranks + 1;
    m = m < 7 ? m : 7;
    return (double)(((size_t)r + i) % (size_t)m);
  }
  }
}

static int is_float(bench_dtype_t t) {
  return t >= BENCH_HALF;
}

static double reduced(const bench_case_t *k, size_t i) {
  double acc = pattern(k, 0, i);
  for (int r = 1; r < k->nranks; r++) {
    double v = pattern(k, r, i);
    switch (k->op) {
    case BENCH_PROD:
      acc *= v;
      break;
    case BENCH_MAX:
      acc = v > acc ? v : acc;
      break;
    case BENCH_MIN:
      acc = v < acc ? v : acc;
      break;
    default:
      acc += v;
      break;
    }
  }
  if (k->op == BENCH_AVG)
    acc = is_float(k->dtype) ? acc / k->nranks : floor(acc / k->nranks);
  return acc;
}

/* Expected element j of rank r's output. */
static double expected(const bench_case_t *k, int r, size_t j) {
  size_t c = k->count;
  switch (k->coll) {
  case BENCH_ALLGATHER:
    return pattern(k, (int)(j / c), j % c);
  case BENCH_REDUCESCATTER:
    return reduced(k, (size_t)r * c + j);
  case BENCH_BROADCAST:
    return pattern(k, k->root, j);
  case BENCH_ALLTOALL:
    return pattern(k, (int)(j / c), (size_t)r * c + j % c);
  case BENCH_SENDRECV:
    return pattern(k, (r + k->nranks - 1) % k->nranks, j);
  default: /* allreduce, reduce */
    return reduced(k, j);
  }
}

static int mant_bits(bench_dtype_t t) {
  static const int bits[] = {[BENCH_HALF] = 10,    [BENCH_FLOAT] = 23,  [BENCH_DOUBLE] = 52,
                             [BENCH_BFLOAT16] = 7, [BENCH_FP8E4M3] = 3, [BENCH_FP8E5M2] = 2};
  return is_float(t) ? bits[t] : 0;
}

size_t bench_count_wrong(const bench_case_t *k, int rank, const void *out) {
  if (k->coll == BENCH_REDUCE && rank != k->root)
    return 0;
  /* PreMulSum by 1/n rounds each term: a few units in the last place of the result. */
  double rel = k->op == BENCH_AVG && is_float(k->dtype) ? ldexp(1, 2 - mant_bits(k->dtype)) : 0;
  size_t wrong = 0;
  for (size_t j = 0; j < k->out_elems; j++) {
    double want = expected(k, rank, j), got = bench_load(k->dtype, out, j);
    double tol = rel * (fabs(want) > 1 ? fabs(want) : 1);
    if (!(fabs(got - want) <= tol)) /* NaN (the 0xff fill) counts as wrong */
      wrong++;
  }
  return wrong;
}

void bench_fill_input(const bench_case_t *k, int rank, void *buf) {
  for (size_t i = 0; i < k->in_elems; i++)
    bench_store(k->dtype, buf, i, pattern(k, rank, i));
}

/* The small floating formats: e exponent bits with bias, m mantissa bits, no sign in use. */
typedef struct {
  int ebits, mbits, bias, fn; /* fn: no infinities, all-ones exponent and mantissa is NaN */
} minifloat_t;

static minifloat_t minifloat_of(bench_dtype_t t) {
  switch (t) {
  case BENCH_HALF:
    return (minifloat_t){5, 10, 15, 0};
  case BENCH_BFLOAT16:
    return (minifloat_t){8, 7, 127, 0};
  case BENCH_FP8E4M3:
    return (minifloat_t){4, 3, 7, 1};
  default: /* e5m2 */
    return (minifloat_t){5, 2, 15, 0};
  }
}

static double mf_decode(minifloat_t f, uint32_t b) {
  uint32_t emask = (1u << f.ebits) - 1, mmask = (1u << f.mbits) - 1;
  uint32_t e = (b >> f.mbits) & emask, m = b & mmask;
  int neg = (b >> (f.ebits + f.mbits)) & 1;
  double v;
  if (e == emask && (!f.fn || m == mmask))
    return NAN; /* infinities count as wrong too */
  if (e == 0)
    v = ldexp((double)m, 1 - f.bias - f.mbits);
  else
    v = ldexp((double)(m | (1u << f.mbits)), (int)e - f.bias - f.mbits);
  return neg ? -v : v;
}

static uint32_t mf_encode(minifloat_t f, double v) {
  if (v == 0)
    return 0;
  int e;
  double frac = frexp(v, &e); /* v = frac * 2^e, frac in [0.5, 1) */
  uint32_t m = (uint32_t)((frac * 2 - 1) * (double)(1u << f.mbits));
  return ((uint32_t)(e - 1 + f.bias) << f.mbits) | m;
}

/* The types C has: element type and its bench_dtype_t. */
#define NATIVE_TYPES(X)                                                                            \
  X(BENCH_INT8, int8_t)                                                                            \
  X(BENCH_UINT8, uint8_t)                                                                          \
  X(BENCH_INT32, int32_t)                                                                          \
  X(BENCH_UINT32, uint32_t)                                                                        \
  X(BENCH_INT64, int64_t)                                                                          \
  X(BENCH_UINT64, uint64_t)                                                                        \
  X(BENCH_FLOAT, float)                                                                            \
  X(BENCH_DOUBLE, double)

/* memcpy: the buffers are byte arrays with no alignment promised. */
double bench_load(bench_dtype_t t, const void *buf, size_t i) {
  const unsigned char *p = (const unsigned char *)buf + i * bench_dtype_size(t);
  uint16_t u16;
  switch (t) {
#define LOAD(id, T)                                                                                \
  case id: {                                                                                       \
    T v;                                                                                           \
    memcpy(&v, p, sizeof(v));                                                                      \
    return (double)v;                                                                              \
  }
    NATIVE_TYPES(LOAD)
#undef LOAD
  case BENCH_HALF:
  case BENCH_BFLOAT16:
    memcpy(&u16, p, sizeof(u16));
    return mf_decode(minifloat_of(t), u16);
  default:
    return mf_decode(minifloat_of(t), *p);
  }
}

void bench_store(bench_dtype_t t, void *buf, size_t i, double v) {
  unsigned char *p = (unsigned char *)buf + i * bench_dtype_size(t);
  uint16_t u16;
  switch (t) {
#define STORE(id, T)                                                                               \
  case id: {                                                                                       \
    T x = (T)v;                                                                                    \
    memcpy(p, &x, sizeof(x));                                                                      \
    return;                                                                                        \
  }
    NATIVE_TYPES(STORE)
#undef STORE
  case BENCH_HALF:
  case BENCH_BFLOAT16:
    u16 = (uint16_t)mf_encode(minifloat_of(t), v);
    memcpy(p, &u16, sizeof(u16));
    return;
  default:
    *p = (unsigned char)mf_encode(minifloat_of(t), v);
    return;
  }
}
