/* SPDX-License-Identifier: MIT
 * Private to kernels/: the elementwise kernels' tables (exec_ew.cu, exec_ewx.cu), which
 * exec_kernel.cu's launch table reads; one row per dtype, in types.def order. */
#ifndef PCL_EXEC_EW_H
#define PCL_EXEC_EW_H

#include "kernel_abi.h"

typedef void (*pcl_kfn_t)(pcl_kargs_t);

/* The EW kernels are compiled once per form, with nothing chosen at run time: a kernel holding
 * every form behind a branch tree ran ~4-10 % slower than a kernel of one (the code it jumps
 * through at entry and back to the common tail; docs/performance.md). The form is
 * (reduction, packet type, alignment): the reductions of types.def's PCL_KREDOP list in its order
 * (avg reduces as sum, so its entries are sum's kernels), pcl_kpkt_t, then 0 for user buffers
 * only element-aligned, 1 for buffers aligned to the packet's payload word. */
#define PCL_KEW_NREDOPS 5
#define PCL_KEW_NFORMS (PCL_KEW_NREDOPS * PCL_KPKT_COUNT * 2)

/* fn[k][form]: the kernel for up to 2 << k puts and terms: the EW kernels' (PCL_KVAR_EW2 + k,
 * kernels.h) in pcl_kew_table, the EWX kernels' (PCL_KVAR_EWX2 + k) in pcl_kewx_table. */
#define PCL_KEW_BOUNDS 3
typedef struct {
  int dtype; /* ncclDataType_t */
  pcl_kfn_t fn[PCL_KEW_BOUNDS][PCL_KEW_NFORMS];
} pcl_kew_entry_t;

extern const pcl_kew_entry_t pcl_kew_table[];
extern const int pcl_kew_table_n;
extern const pcl_kew_entry_t pcl_kewx_table[];
extern const int pcl_kewx_table_n;

#endif
