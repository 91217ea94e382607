/* SPDX-License-Identifier: MIT
 * Simulator arithmetic: element-wise reductions for every dtype x op, fp16/bf16/fp8 (e4m3, e5m2)
 * conversion in plain C, the avg post-scale, and the per-dtype rounding facts the checker uses. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "sim_int.h"

/* Minifloat formats, decoded through double. e4m3 is the "FN" flavour: no infinities, exponent
 * 15 with mantissa 7 is NaN, so the largest finite value is 448. */
typedef struct {
  int ebits, mbits, bias;
  int ieee;     /* 1: all-ones exponent = inf/NaN (fp16, bf16, e5m2) */
  int saturate; /* 1: overflow clamps to the largest finite value (fp8, SATFINITE) */
  double max_finite;
} minifloat_t;

static const minifloat_t k_fp16 = {5, 10, 15, 1, 0, 65504.0};
static const minifloat_t k_bf16 = {8, 7, 127, 1, 0, 3.3895313892515355e38};
static const minifloat_t k_e4m3 = {4, 3, 7, 0, 1, 448.0};
static const minifloat_t k_e5m2 = {5, 2, 15, 1, 1, 57344.0};

static double mf_decode(const minifloat_t *f, uint32_t bits) {
  uint32_t mmask = (1u << f->mbits) - 1, emax = (1u << f->ebits) - 1;
  uint32_t sign = bits >> (f->ebits + f->mbits) & 1;
  uint32_t e = (bits >> f->mbits) & emax, m = bits & mmask;
  double v;
  if (f->ieee && e == emax) {
    v = m ? NAN : INFINITY;
  } else if (!f->ieee && e == emax && m == mmask) {
    v = NAN;
  } else if (e == 0) {
    v = ldexp((double)m, 1 - f->bias - f->mbits);
  } else {
    v = ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
  }
  return sign ? -v : v;
}

/* double -> minifloat, round to nearest even, by bit manipulation (no libm in the hot loop).
 * The value is m * 2^(e-52) with a 53-bit m; the target quantum is 2^q, q = max(e, emin) - mbits.
 */
static uint32_t mf_encode(const minifloat_t *f, double v) {
  uint64_t b;
  memcpy(&b, &v, 8);
  uint32_t sign = (uint32_t)(b >> 63) << (f->ebits + f->mbits);
  uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  uint32_t maxbits = f->ieee ? ((emax - 1) << f->mbits) | mmask : (emax << f->mbits) | (mmask - 1);
  uint32_t ovf = f->saturate ? maxbits : emax << f->mbits;
  uint64_t a = b & ~(1ull << 63);
  int bexp = (int)(a >> 52);
  if (bexp == 0x7ff) {
    if (a & ((1ull << 52) - 1))
      return f->ieee ? (emax << f->mbits) | (1u << (f->mbits - 1)) : 0x7f;
    return sign | ovf;
  }
  if (bexp == 0)
    return sign; /* double subnormals are far below every minifloat's range */
  int e = bexp - 1023, emin = 1 - f->bias;
  uint64_t m = (a & ((1ull << 52) - 1)) | (1ull << 52);
  int q = (e < emin ? emin : e) - f->mbits;
  int shift = q - (e - 52);
  if (shift >= 54)
    return sign;
  uint64_t r = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (r & 1)))
    r++;
  if (r == 0)
    return sign;
  if (r >> (f->mbits + 1)) {
    r >>= 1;
    q++;
  }
  if (r < (1ull << f->mbits))
    return sign | (uint32_t)r; /* subnormal */
  int field = q + f->mbits + f->bias;
  uint32_t mant = (uint32_t)r & mmask;
  uint32_t bits = ((uint32_t)field << f->mbits) | mant;
  if (field > (int)emax || bits > maxbits)
    return sign | ovf;
  return sign | bits;
}

/* Decode tables for the 8- and 16-bit formats, filled once per process. */
static float g_e4m3[256], g_e5m2[256], g_fp16[65536];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void tables_fill(void) {
  for (int i = 0; i < 256; i++) {
    g_e4m3[i] = (float)mf_decode(&k_e4m3, (uint32_t)i);
    g_e5m2[i] = (float)mf_decode(&k_e5m2, (uint32_t)i);
  }
  for (int i = 0; i < 65536; i++)
    g_fp16[i] = (float)mf_decode(&k_fp16, (uint32_t)i);
}

static void tables_init(void) {
  pthread_once(&g_tables_once, tables_fill);
}

double pcl_sim_dtype_max(ncclDataType_t t) {
  switch (t) {
  case ncclFloat16:
    return k_fp16.max_finite;
  case ncclBfloat16:
    return k_bf16.max_finite;
  case ncclFloat8e4m3:
    return k_e4m3.max_finite;
  case ncclFloat8e5m2:
    return k_e5m2.max_finite;
  case ncclFloat32:
    return 3.4028234663852886e38;
  default:
    return 1.7976931348623157e308;
  }
}

static inline double load_fast(ncclDataType_t t, const void *p) {
  switch (t) {
  case ncclInt8:
    return *(const int8_t *)p;
  case ncclUint8:
    return *(const uint8_t *)p;
  case ncclInt32: {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  case ncclUint32: {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  case ncclInt64: {
    int64_t v;
    memcpy(&v, p, 8);
    return (double)v;
  }
  case ncclUint64: {
    uint64_t v;
    memcpy(&v, p, 8);
    return (double)v;
  }
  case ncclFloat32: {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  case ncclFloat64: {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  case ncclFloat16: {
    uint16_t v;
    memcpy(&v, p, 2);
    return g_fp16[v];
  }
  case ncclBfloat16: {
    uint16_t v;
    memcpy(&v, p, 2);
    uint32_t w = (uint32_t)v << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
  }
  case ncclFloat8e4m3:
    return g_e4m3[*(const uint8_t *)p];
  case ncclFloat8e5m2:
    return g_e5m2[*(const uint8_t *)p];
  default:
    return 0;
  }
}

double pcl_sim_load(ncclDataType_t t, const void *p) {
  tables_init();
  return load_fast(t, p);
}

void pcl_sim_store(ncclDataType_t t, void *p, double v) {
  switch (t) {
  case ncclInt8:
    *(int8_t *)p = (int8_t)(int64_t)v;
    break;
  case ncclUint8:
    *(uint8_t *)p = (uint8_t)(int64_t)v;
    break;
  case ncclInt32: {
    int32_t x = (int32_t)(int64_t)v;
    memcpy(p, &x, 4);
    break;
  }
  case ncclUint32: {
    uint32_t x = (uint32_t)(int64_t)v;
    memcpy(p, &x, 4);
    break;
  }
  case ncclInt64: {
    int64_t x = (int64_t)v;
    memcpy(p, &x, 8);
    break;
  }
  case ncclUint64: {
    uint64_t x = (uint64_t)v;
    memcpy(p, &x, 8);
    break;
  }
  case ncclFloat32: {
    float x = (float)v;
    memcpy(p, &x, 4);
    break;
  }
  case ncclFloat64:
    memcpy(p, &v, 8);
    break;
  case ncclFloat16: {
    uint16_t x = (uint16_t)mf_encode(&k_fp16, v);
    memcpy(p, &x, 2);
    break;
  }
  case ncclBfloat16: {
    uint16_t x = (uint16_t)mf_encode(&k_bf16, v);
    memcpy(p, &x, 2);
    break;
  }
  case ncclFloat8e4m3:
    *(uint8_t *)p = (uint8_t)mf_encode(&k_e4m3, v);
    break;
  case ncclFloat8e5m2:
    *(uint8_t *)p = (uint8_t)mf_encode(&k_e5m2, v);
    break;
  default:
    break;
  }
}

/* Integer kernels: unsigned arithmetic for sum/prod (wraps without UB, same bits as signed). */
#define INT_LOOP(T, UT, OPX)                                                                       \
  do {                                                                                             \
    T *a = (T *)acc;                                                                               \
    const T *b = (const T *)src;                                                                   \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x, y;                                                                                      \
      memcpy(&x, a + i, sizeof(T));                                                                \
      memcpy(&y, b + i, sizeof(T));                                                                \
      OPX;                                                                                         \
      memcpy(a + i, &x, sizeof(T));                                                                \
    }                                                                                              \
  } while (0)

#define INT_OPS(T, UT)                                                                             \
  switch (op) {                                                                                    \
  case ncclProd:                                                                                   \
    INT_LOOP(T, UT, x = (T)((UT)x * (UT)y));                                                       \
    break;                                                                                         \
  case ncclMax:                                                                                    \
    INT_LOOP(T, UT, x = x > y ? x : y);                                                            \
    break;                                                                                         \
  case ncclMin:                                                                                    \
    INT_LOOP(T, UT, x = x < y ? x : y);                                                            \
    break;                                                                                         \
  default:                                                                                         \
    INT_LOOP(T, UT, x = (T)((UT)x + (UT)y));                                                       \
    break;                                                                                         \
  }

/* x is the accumulator: min/max are written as the kernel's pcl_kred writes them, so equal
 * values (+0 and -0) keep the accumulator's bits. */
static inline double fop(ncclRedOp_t op, double x, double y) {
  switch (op) {
  case ncclProd:
    return x * y;
  case ncclMax:
    return x < y ? y : x;
  case ncclMin:
    return y < x ? y : x;
  default:
    return x + y;
  }
}

void pcl_sim_reduce(ncclDataType_t t, ncclRedOp_t op, void *acc, const void *src, size_t n) {
  if (op == ncclAvg)
    op = ncclSum;
  switch (t) {
  case ncclInt8:
    INT_OPS(int8_t, uint8_t);
    return;
  case ncclUint8:
    INT_OPS(uint8_t, uint8_t);
    return;
  case ncclInt32:
    INT_OPS(int32_t, uint32_t);
    return;
  case ncclUint32:
    INT_OPS(uint32_t, uint32_t);
    return;
  case ncclInt64:
    INT_OPS(int64_t, uint64_t);
    return;
  case ncclUint64:
    INT_OPS(uint64_t, uint64_t);
    return;
  case ncclFloat32: {
    float *a = acc;
    const float *b = src;
    for (size_t i = 0; i < n; i++) {
      float x, y;
      memcpy(&x, a + i, 4);
      memcpy(&y, b + i, 4);
      x = (float)fop(op, x, y);
      memcpy(a + i, &x, 4);
    }
    return;
  }
  case ncclFloat64: {
    double *a = acc;
    const double *b = src;
    for (size_t i = 0; i < n; i++) {
      double x, y;
      memcpy(&x, a + i, 8);
      memcpy(&y, b + i, 8);
      x = fop(op, x, y);
      memcpy(a + i, &x, 8);
    }
    return;
  }
  default: {
    size_t es = pcl_dtype_bytes(t);
    uint8_t *a = acc;
    const uint8_t *b = src;
    tables_init();
    for (size_t i = 0; i < n; i++) {
      double x = load_fast(t, a + i * es), y = load_fast(t, b + i * es);
      pcl_sim_store(t, a + i * es, fop(op, x, y));
    }
    return;
  }
  }
}

/* Integer avg: the wrapped sum divided by n, truncating toward zero (C division). */
#define INT_DIV(T, WIDE)                                                                           \
  do {                                                                                             \
    T *a = buf;                                                                                    \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x;                                                                                         \
      memcpy(&x, a + i, sizeof(T));                                                                \
      x = (T)((WIDE)x / (WIDE)nranks);                                                             \
      memcpy(a + i, &x, sizeof(T));                                                                \
    }                                                                                              \
  } while (0)

void pcl_sim_avg_scale(ncclDataType_t t, void *buf, size_t n, int nranks) {
  switch (t) {
  case ncclInt8:
    INT_DIV(int8_t, int64_t);
    return;
  case ncclUint8:
    INT_DIV(uint8_t, uint64_t);
    return;
  case ncclInt32:
    INT_DIV(int32_t, int64_t);
    return;
  case ncclUint32:
    INT_DIV(uint32_t, uint64_t);
    return;
  case ncclInt64:
    INT_DIV(int64_t, int64_t);
    return;
  case ncclUint64:
    INT_DIV(uint64_t, uint64_t);
    return;
  case ncclFloat64: {
    double s = 1.0 / nranks;
    for (size_t i = 0; i < n; i++) {
      double x;
      memcpy(&x, (double *)buf + i, 8);
      x *= s;
      memcpy((double *)buf + i, &x, 8);
    }
    return;
  }
  default: {
    float s = 1.0f / (float)nranks;
    size_t es = pcl_dtype_bytes(t);
    for (size_t i = 0; i < n; i++) {
      uint8_t *p = (uint8_t *)buf + i * es;
      float x = (float)pcl_sim_load(t, p) * s; /* the product is rounded to fp32 first */
      pcl_sim_store(t, p, (double)x);
    }
    return;
  }
  }
}

double pcl_sim_ulp(ncclDataType_t t, double v) {
  int ex;
  v = fabs(v);
  if (v == 0)
    v = 1;
  (void)frexp(v, &ex);
  return ldexp(1.0, ex - 1 - pcl_dtype_mbits(t));
}
