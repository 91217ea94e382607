/* SPDX-License-Identifier: MIT
 * Private to kernels/: the elementwise kernels' table (exec_ew.cu), which exec_kernel.cu's launch
 * table reads; one row per dtype, in types.def order. */
#ifndef PCL_EXEC_EW_H
#define PCL_EXEC_EW_H

#include "kernel_abi.h"

typedef void (*pcl_kfn_t)(pcl_kargs_t);

/* fn[k]: the kernel for up to 2 << k puts and terms (PCL_KVAR_EW2 + k, kernels.h). */
typedef struct {
  int dtype; /* ncclDataType_t */
  pcl_kfn_t fn[3];
} pcl_kew_entry_t;

extern const pcl_kew_entry_t pcl_kew_table[];
extern const int pcl_kew_table_n;

#endif
