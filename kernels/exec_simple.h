/* SPDX-License-Identifier: MIT
 * Private to kernels/: the Simple kernel's table (exec_simple.cu), which exec_kernel.cu's launch
 * table reads; one row per dtype, in types.def order. */
#ifndef PCL_EXEC_SIMPLE_H
#define PCL_EXEC_SIMPLE_H

#include "exec_ew.h"

typedef struct {
  int dtype; /* ncclDataType_t */
  pcl_kfn_t fn;
} pcl_ksimple_entry_t;

extern const pcl_ksimple_entry_t pcl_ksimple_table[];
extern const int pcl_ksimple_table_n;

#endif
