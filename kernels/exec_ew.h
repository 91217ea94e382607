/* SPDX-License-Identifier: MIT
 * Private to kernels/: the elementwise kernels' table (exec_ew.cu), which exec_kernel.cu's launch
 * table reads; one row per dtype, in types.def order. */
#ifndef PCL_EXEC_EW_H
#define PCL_EXEC_EW_H

#include "kernel_abi.h"

typedef void (*pcl_kfn_t)(pcl_kargs_t);

/* The EW kernels are compiled once per form, with nothing chosen at run time: a kernel holding
 * every form behind a branch tree ran ~4-10 % slower than a kernel of one (the code it jumps
 * through at entry and back to the common tail; bench/NOTES.md, step 11). The form is
 * (reduction, packet type, alignment): the reductions of types.def's PCL_KREDOP list in its order
 * (avg reduces as sum, so its entries are sum's kernels), pcl_kpkt_t, then 0 for user buffers
 * only element-aligned, 1 for buffers aligned to the packet's payload word. */
#define PCL_KEW_NREDOPS 5
#define PCL_KEW_NFORMS (PCL_KEW_NREDOPS * PCL_KPKT_COUNT * 2)

/* fn[k][form]: for k < 3 the EW kernel for up to 2 << k puts and terms (PCL_KVAR_EW2 + k,
 * kernels.h); fn[3] the EWX kernel (PCL_KVAR_EWX). */
#define PCL_KEW_ROWS 4
typedef struct {
  int dtype; /* ncclDataType_t */
  pcl_kfn_t fn[PCL_KEW_ROWS][PCL_KEW_NFORMS];
} pcl_kew_entry_t;

extern const pcl_kew_entry_t pcl_kew_table[];
extern const int pcl_kew_table_n;

#endif
