/* SPDX-License-Identifier: MIT
 * Facts about NCCL data types, all from the one table common/dtypes.def: element size, float or
 * integer, mantissa bits, and the names the tools print and accept. */
#ifndef PCL_DTYPE_H
#define PCL_DTYPE_H

#include <stddef.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

size_t pcl_dtype_bytes(ncclDataType_t t);     /* 0 for an unknown dtype */
int pcl_dtype_is_float(ncclDataType_t t);     /* 0 for integers and unknown dtypes */
int pcl_dtype_mbits(ncclDataType_t t);        /* stored mantissa bits; 63 for integers */
const char *pcl_dtype_name(ncclDataType_t t); /* "fp32", "bf16", "e4m3", ...; "?" if unknown */
int pcl_dtype_from_name(const char *s);       /* a name or alias ("float", "half"); -1 */

#ifdef __cplusplus
}
#endif

#endif
