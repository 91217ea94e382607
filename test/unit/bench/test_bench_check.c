/* SPDX-License-Identifier: MIT
 * planccl-bench's sizes, bus bandwidth factors and checker: each collective simulated on the host
 * in every data type, rounding to the type after each step as a GPU would, must check clean;
 * a changed element and the 0xff fill must be counted. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "bench_check.h"
#include "bench_test.h"

START_TEST(test_busbw_factors) {
  /* nccl-tests: allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; others 1 */
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_ALLREDUCE, 2), 1.0, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_ALLREDUCE, 8), 1.75, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_ALLGATHER, 4), 0.75, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_REDUCESCATTER, 8), 0.875, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_ALLTOALL, 2), 0.5, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_BROADCAST, 8), 1.0, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_REDUCE, 8), 1.0, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_SENDRECV, 8), 1.0, 1e-12);
  ck_assert_double_eq_tol(bench_busbw_factor(BENCH_ALLREDUCE, 1), 0.0, 1e-12);
  ck_assert_double_eq_tol(bench_algbw(1000000000, 1e6), 1.0, 1e-12); /* 1 GB in 1 s */
  ck_assert_double_eq_tol(bench_algbw(1 << 20, 10), 104.8576, 1e-9);
  ck_assert_double_eq_tol(bench_algbw(1 << 20, 0), 0.0, 1e-12);
}
END_TEST

START_TEST(test_case_sizes) {
  bench_case_t k;
  ck_assert_int_eq(bench_case(BENCH_ALLGATHER, BENCH_FLOAT, BENCH_SUM, 4, 0, 1 << 20, &k), 0);
  ck_assert_uint_eq(k.count, 65536);
  ck_assert_uint_eq(k.in_elems, 65536);
  ck_assert_uint_eq(k.out_elems, 262144);
  ck_assert_uint_eq(k.bytes, 1 << 20);
  ck_assert_int_eq(bench_case(BENCH_REDUCESCATTER, BENCH_FLOAT, BENCH_SUM, 3, 0, 1000, &k), 0);
  ck_assert_uint_eq(k.count, 83); /* rounded down to a multiple of ranks x element size */
  ck_assert_uint_eq(k.in_elems, 249);
  ck_assert_uint_eq(k.out_elems, 83);
  ck_assert_uint_eq(k.bytes, 996);
  ck_assert_int_eq(bench_case(BENCH_ALLTOALL, BENCH_HALF, BENCH_SUM, 8, 0, 4096, &k), 0);
  ck_assert_uint_eq(k.count, 256);
  ck_assert_uint_eq(k.in_elems, 2048);
  ck_assert_uint_eq(k.out_elems, 2048);
  ck_assert_int_eq(bench_case(BENCH_ALLREDUCE, BENCH_DOUBLE, BENCH_SUM, 8, 0, 1001, &k), 0);
  ck_assert_uint_eq(k.count, 125);
  ck_assert_uint_eq(k.bytes, 1000);
  ck_assert_int_eq(bench_case(BENCH_SENDRECV, BENCH_INT64, BENCH_SUM, 2, 0, 8, &k), 0);
  ck_assert_uint_eq(k.count, 1);
  ck_assert_int_eq(bench_case(BENCH_ALLGATHER, BENCH_INT8, BENCH_SUM, 8, 0, 7, &k), -1);
  size_t in, out;
  bench_case(BENCH_ALLGATHER, BENCH_FLOAT, BENCH_SUM, 4, 0, 160, &k);
  bench_inplace_offsets(&k, 2, &in, &out);
  ck_assert_uint_eq(in, 20);
  ck_assert_uint_eq(out, 0);
  bench_case(BENCH_REDUCESCATTER, BENCH_FLOAT, BENCH_SUM, 4, 0, 160, &k);
  bench_inplace_offsets(&k, 3, &in, &out);
  ck_assert_uint_eq(in, 0);
  ck_assert_uint_eq(out, 30);
  bench_case(BENCH_ALLREDUCE, BENCH_FLOAT, BENCH_SUM, 4, 0, 160, &k);
  bench_inplace_offsets(&k, 3, &in, &out);
  ck_assert_uint_eq(in + out, 0);
}
END_TEST

START_TEST(test_dtype_encoding) {
  unsigned char b[8];
  uint16_t h;
  bench_store(BENCH_HALF, &h, 0, 1.0);
  ck_assert_uint_eq(h, 0x3c00);
  bench_store(BENCH_BFLOAT16, &h, 0, 1.0);
  ck_assert_uint_eq(h, 0x3f80);
  bench_store(BENCH_HALF, &h, 0, 2048.0);
  ck_assert_uint_eq(h, 0x6800);
  bench_store(BENCH_FP8E4M3, b, 0, 1.0);
  ck_assert_uint_eq(b[0], 0x38);
  bench_store(BENCH_FP8E5M2, b, 0, 1.0);
  ck_assert_uint_eq(b[0], 0x3c);
  bench_store(BENCH_FP8E4M3, b, 0, 448.0); /* the largest e4m3fn value */
  ck_assert_uint_eq(b[0], 0x7e);
  b[0] = 0x7f;
  ck_assert(isnan(bench_load(BENCH_FP8E4M3, b, 0)));
  b[0] = 0x01; /* smallest subnormal */
  ck_assert_double_eq(bench_load(BENCH_FP8E4M3, b, 0), ldexp(1, -9));
  b[0] = 0xbc;
  ck_assert_double_eq(bench_load(BENCH_FP8E5M2, b, 0), -1.0);
  for (int t = 0; t < BENCH_DTYPE_COUNT; t++) {
    memset(b, 0xff, sizeof(b));
    double v = bench_load(t, b, 0);
    if (t >= BENCH_HALF)
      ck_assert_msg(isnan(v), "%s: 0xff fill is %g", bench_dtype_name(t), v);
    for (int i = 0; i <= 8; i++) {
      bench_store(t, b, 0, i);
      ck_assert_double_eq(bench_load(t, b, 0), (double)i);
    }
  }
}
END_TEST

/* v rounded to t as the GPU would hold it (the store truncates; only exact values survive). */
static double in_type(bench_dtype_t t, double v) {
  unsigned char b[8];
  bench_store(t, b, 0, v);
  return bench_load(t, b, 0);
}

static double combine(bench_op_t op, double a, double b) {
  switch (op) {
  case BENCH_PROD:
    return a * b;
  case BENCH_MAX:
    return a > b ? a : b;
  case BENCH_MIN:
    return a < b ? a : b;
  default:
    return a + b;
  }
}

/* Element i reduced over the ranks' inputs, each step rounded to the type; avg as NCCL does it
 * (floating types: each term times 1/n, integers: the sum divided by n). */
static double sim_reduce(const bench_case_t *k, unsigned char **in, size_t i) {
  int fl = k->dtype >= BENCH_HALF, n = k->nranks;
  double acc = 0;
  for (int r = 0; r < n; r++) {
    double v = bench_load(k->dtype, in[r], i);
    if (k->op == BENCH_AVG && fl)
      v = in_type(k->dtype, v * (1.0 / n));
    acc = r == 0 ? v : in_type(k->dtype, combine(k->op, acc, v));
  }
  return k->op == BENCH_AVG && !fl ? floor(acc / n) : acc;
}

/* Rank r's output of the collective, computed from the inputs alone. */
static void simulate(const bench_case_t *k, unsigned char **in, int r, unsigned char *out) {
  size_t c = k->count;
  int n = k->nranks;
  for (size_t j = 0; j < k->out_elems; j++) {
    double v;
    switch (k->coll) {
    case BENCH_ALLGATHER:
      v = bench_load(k->dtype, in[j / c], j % c);
      break;
    case BENCH_REDUCESCATTER:
      v = sim_reduce(k, in, (size_t)r * c + j);
      break;
    case BENCH_BROADCAST:
      v = bench_load(k->dtype, in[k->root], j);
      break;
    case BENCH_ALLTOALL:
      v = bench_load(k->dtype, in[j / c], (size_t)r * c + j % c);
      break;
    case BENCH_SENDRECV:
      v = bench_load(k->dtype, in[(r + n - 1) % n], j);
      break;
    default:
      v = sim_reduce(k, in, j);
      break;
    }
    bench_store(k->dtype, out, j, v);
  }
}

static void check_case(bench_coll_t coll, bench_dtype_t t, bench_op_t op, int n, int root) {
  bench_case_t k;
  unsigned char *in[BENCH_MAX_GPUS], *out;
  size_t es = bench_dtype_size(t);
  ck_assert_int_eq(bench_case(coll, t, op, n, root, 96 * es * (size_t)n, &k), 0);
  for (int r = 0; r < n; r++) {
    in[r] = malloc(k.in_elems * es);
    bench_fill_input(&k, r, in[r]);
  }
  out = malloc(k.out_elems * es);
  for (int r = 0; r < n; r++) {
    simulate(&k, in, r, out);
    const char *what = bench_coll_name(coll);
    ck_assert_msg(bench_count_wrong(&k, r, out) == 0, "%s %s %s n=%d rank %d: wrong", what,
                  bench_dtype_name(t), bench_op_name(op), n, r);
    if (coll == BENCH_REDUCE && r != root)
      continue;
    /* A value off by two is one wrong element; avg on floating types has a tolerance (its 1/n
     * scaling rounds), so there the value is moved well beyond it. */
    double v = bench_load(t, out, k.out_elems / 2);
    int loose = op == BENCH_AVG && t >= BENCH_HALF;
    bench_store(t, out, k.out_elems / 2, loose ? v * 4 + 4 : v >= 2 ? v - 2 : v + 2);
    ck_assert_uint_eq(bench_count_wrong(&k, r, out), 1);
    memset(out, t >= BENCH_HALF ? 0xff : 0x7f, k.out_elems * es);
    ck_assert_uint_eq(bench_count_wrong(&k, r, out), k.out_elems);
  }
  for (int r = 0; r < n; r++)
    free(in[r]);
  free(out);
}

START_TEST(test_every_collective_checks_clean) {
  static const int ranks[] = {1, 2, 3, 8};
  for (int c = 0; c < BENCH_COLL_COUNT; c++)
    for (int t = 0; t < BENCH_DTYPE_COUNT; t++)
      for (size_t ni = 0; ni < 4; ni++) {
        int n = ranks[ni];
        if (!bench_coll_has_op(c)) {
          check_case(c, t, BENCH_SUM, n, n - 1);
          continue;
        }
        for (int op = 0; op < BENCH_OP_COUNT; op++)
          check_case(c, t, op, n, n / 2);
      }
}
END_TEST

START_TEST(test_patterns_tell_ranks_apart) {
  /* Data-moving collectives must see a block from the wrong peer. */
  bench_case_t k;
  ck_assert_int_eq(bench_case(BENCH_ALLGATHER, BENCH_FP8E5M2, BENCH_SUM, 8, 0, 8 * 64, &k), 0);
  unsigned char a[64], b[64];
  bench_fill_input(&k, 1, a);
  bench_fill_input(&k, 2, b);
  ck_assert_int_ne(memcmp(a, b, sizeof(a)), 0);
  unsigned char out[512];
  for (int q = 0; q < 8; q++)
    bench_fill_input(&k, q, out + q * 64);
  ck_assert_uint_eq(bench_count_wrong(&k, 0, out), 0);
  memcpy(out + 64, out + 128, 64); /* rank 2's block where rank 1's belongs */
  ck_assert_uint_gt(bench_count_wrong(&k, 0, out), 32);
}
END_TEST

TCase *bench_tcase_check(void) {
  TCase *tc = tcase_create("check");
  tcase_set_timeout(tc, 120); /* every collective, type, op and rank count: slow under ASan */
  tcase_add_test(tc, test_busbw_factors);
  tcase_add_test(tc, test_case_sizes);
  tcase_add_test(tc, test_dtype_encoding);
  tcase_add_test(tc, test_every_collective_checks_clean);
  tcase_add_test(tc, test_patterns_tell_ranks_apart);
  return tc;
}
