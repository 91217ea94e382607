/* SPDX-License-Identifier: MIT
 * The dtype facts of common/dtype.h, generated from common/dtypes.def. */
#include <string.h>
#include "dtype.h"

static const struct {
  int t;
  size_t bytes;
  int is_float, mbits;
  const char *name;
} k_dtypes[] = {
#define PCL_DTYPE(suffix, nccl, nbytes, flt, mb, nm) {nccl, nbytes, flt, mb, nm},
#include "dtypes.def"
#undef PCL_DTYPE
};
#define K_N ((int)(sizeof(k_dtypes) / sizeof(k_dtypes[0])))

/* The table is in enum order (checked by the common unit test), so the value is the index. */
static int idx(ncclDataType_t t) {
  return (int)t >= 0 && (int)t < K_N && k_dtypes[(int)t].t == (int)t ? (int)t : -1;
}

size_t pcl_dtype_bytes(ncclDataType_t t) {
  int i = idx(t);
  return i < 0 ? 0 : k_dtypes[i].bytes;
}

int pcl_dtype_is_float(ncclDataType_t t) {
  int i = idx(t);
  return i < 0 ? 0 : k_dtypes[i].is_float;
}

int pcl_dtype_mbits(ncclDataType_t t) {
  int i = idx(t);
  return i < 0 ? 63 : k_dtypes[i].mbits;
}

const char *pcl_dtype_name(ncclDataType_t t) {
  int i = idx(t);
  return i < 0 ? "?" : k_dtypes[i].name;
}

int pcl_dtype_from_name(const char *s) {
  static const struct {
    const char *alias;
    int t;
  } aliases[] = {{"float", ncclFloat32},
                 {"float32", ncclFloat32},
                 {"half", ncclFloat16},
                 {"float16", ncclFloat16},
                 {"double", ncclFloat64},
                 {"float64", ncclFloat64},
                 {"bfloat16", ncclBfloat16},
                 {"fp8e4m3", ncclFloat8e4m3},
                 {"fp8e5m2", ncclFloat8e5m2},
                 {"fp8_e4m3", ncclFloat8e4m3},
                 {"fp8_e5m2", ncclFloat8e5m2},
                 {"int", ncclInt32},
                 {"char", ncclInt8}};
  if (s == NULL)
    return -1;
  for (int i = 0; i < K_N; i++)
    if (strcmp(s, k_dtypes[i].name) == 0)
      return k_dtypes[i].t;
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
    if (strcmp(s, aliases[i].alias) == 0)
      return aliases[i].t;
  return -1;
}
