/* SPDX-License-Identifier: MIT
 * Host API of the plan-interpreter kernels (kernels/exec_kernel.cu): which dtypes, reduction ops
 * and packet types they support, loading every variant eagerly, and the launch. */
#ifndef PCL_KERNELS_H
#define PCL_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when a kernel exists for the dtype (all twelve NCCL 2.28 types). */
int pcl_kernels_dtype_supported(ncclDataType_t dtype);

/* 1 when (dtype, op) can be reduced: sum, prod, min, max, avg for every dtype. */
int pcl_kernels_redop_supported(ncclDataType_t dtype, ncclRedOp_t op);

/* 1 when reduce-over-packets works for (dtype, packet type): a packet's payload must hold whole
 * elements, so LL8 (4-byte payload) cannot reduce 8-byte dtypes. Packet copies (no reduction)
 * work for every dtype. */
int pcl_kernels_pkt_reduce_supported(ncclDataType_t dtype, pcl_kpkt_t pkt);

/* Element size in bytes, 0 for an unknown dtype. */
size_t pcl_kernels_dtype_bytes(ncclDataType_t dtype);

/* Loads every kernel variant on the CURRENT device (cudaFuncGetAttributes + the dynamic shared
 * memory attribute), so no lazy module load happens while a collective kernel spins on the same
 * device. Call once per device at communicator init; cheap on later calls. */
ncclResult_t pcl_kernels_load_all(void);

/* The kernels that run a program: the interpreter (any valid plan, packed program), the LL fast
 * path (packed programs of packet ops over memory channels only: pcl_exec_ll_eligible), the
 * Simple kernel (packed programs of plain ops over memory channels: pcl_exec_simple_eligible),
 * and the elementwise kernels (a pcl_kew_t per block: pcl_exec_ew_build) for up to 2, 4 and 8
 * puts and terms per block. The LL and elementwise kernels take at most PCL_KABI_LL_MAX_THREADS
 * threads, the interpreter, the wide LL kernel and the Simple kernel 1024. The wide LL kernel is
 * the LL kernel built for 1024 threads (64 registers a thread where the LL kernel keeps about
 * 110), for plans that ask more than PCL_KABI_LL_MAX_THREADS threads over ranges too large for
 * one pass of the narrower kernel (pcl_exec_ll_wide says which); fp32, fp16 and bf16 only (the
 * other dtypes run the interpreter there: pcl_kernels_kernel_name). */
typedef enum {
  PCL_KVAR_INTERP = 0,
  PCL_KVAR_LL = 1,
  PCL_KVAR_LL_WIDE = 2,
  PCL_KVAR_SIMPLE = 3,
  PCL_KVAR_EW2 = 4,
  PCL_KVAR_EW4 = 5,
  PCL_KVAR_EW8 = 6,
  PCL_KVAR_EWX2 = 7, /* several plain streams per block (a pcl_kewx_t per block) */
  PCL_KVAR_EWX4 = 8,
  PCL_KVAR_EWX8 = 9,
  PCL_KVARIANTS = 10
} pcl_kvariant_t;

/* "interpreter", "LL kernel", "LL kernel (1024 threads)", "Simple kernel", "EW2 kernel" ...
 * "EWX8 kernel"; "?" out of range. */
const char *pcl_kernels_variant_name(pcl_kvariant_t variant);

/* The name of the kernel a launch of the variant runs for the dtype: the variant's, except the
 * wide LL kernel, which is built for fp32, fp16 and bf16 only; the other dtypes' launches of it
 * run the interpreter. */
const char *pcl_kernels_kernel_name(pcl_kvariant_t variant, ncclDataType_t dtype);

/* Payload bytes of one packet (types.def: 8 for LL16, 4 for LL8), 0 for an unknown type. */
size_t pcl_kernels_pkt_payload_bytes(pcl_kpkt_t pkt);

/* The EW kernels are compiled once per form, so that nothing is chosen inside them: the form of
 * a launch that reduces with `op` (the plan's, else the call's; avg's kernel is sum's) over
 * `pkt` packets, `aligned` when every S and O of the call (user buffer base plus the block's
 * offset) is a multiple of the packet's payload word. -1 for an op or packet type without EW
 * kernels. */
int pcl_kernels_ew_form(ncclRedOp_t op, pcl_kpkt_t pkt, int aligned); /* EWX's forms too */

/* Launches `variant` for `dtype` with nblocks x nthreads on `stream` (capture-safe: a plain
 * kernel launch); `form` is pcl_kernels_ew_form's for the EW variants, 0 for the others.
 * ncclInvalidArgument for an unsupported dtype, variant, form or shape. */
ncclResult_t pcl_kernels_launch(ncclDataType_t dtype, pcl_kvariant_t variant, int form,
                                const pcl_kargs_t *args, int nblocks, int nthreads,
                                cudaStream_t stream);

/* 1 when planned kernels are to be launched with programmatic dependent launch: PLANCCL_PDL=1
 * and kernels built with -DPCL_PDL=ON. PLANCCL_PDL=1 on a build without is WARNed once and
 * ignored (such kernels would not wait for their predecessor). */
int pcl_kernels_pdl(void);

/* How many blocks of `nthreads` threads fit on the CURRENT device at once (the least over the
 * dtypes and kernel variants: occupancy per SM x SMs); 0 on error. Spinning blocks that
 * wait on each other must all be resident, so a launch needing more could hang. Asked of the
 * driver once per (device, nthreads), then remembered; any thread. */
int pcl_kernels_resident_blocks(int nthreads);

#ifdef __cplusplus
}
#endif

#endif
