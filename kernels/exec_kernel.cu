/* SPDX-License-Identifier: MIT
 * The plan interpreter: one kernel per dtype (instantiated from types.def; the reduction op and
 * the packet type are runtime switches), its launch table (driver cuLaunchKernel when available,
 * else cudaLaunchKernel), eager loading of every variant, and the in-kernel flag protocol that
 * keeps CUDA graph replays and plan switches in lock-step. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h> /* driver types only: entry points come from cudaGetDriverEntryPointByVersion */
#include "kernels.h"
#include "exec_ops.cuh"
extern "C" {
#include "log.h"
#include "param.h"
}

/* Copies this block's program into shared memory, runs its ops, then advances the
 * communicator's flag once the last block of the grid is done (protocol in kernel_abi.h). */
template <typename T> __global__ void __launch_bounds__(1024, 1) pcl_kexec(pcl_kargs_t a) {
  extern __shared__ uint4 pcl_ksmem[];
  __shared__ pcl_kctx_t ctx;
  __shared__ uint64_t flag64;
  {
    /* Only the used prefix of each array is copied: the whole program is 8.4 KB, and a copy of
     * it cost a block of 32 threads 17 dependent rounds of loads (~2 us) on every call. */
    const pcl_kblock_t *gb = &a.blocks[blockIdx.x];
    const uint32_t counts[5] = {gb->nmem, gb->nport, gb->nremote, gb->nops, gb->nrefs};
    const uint32_t offs[5] = {offsetof(pcl_kblock_t, mem), offsetof(pcl_kblock_t, port),
                              offsetof(pcl_kblock_t, remote), offsetof(pcl_kblock_t, ops),
                              offsetof(pcl_kblock_t, refs)};
    const uint32_t sizes[5] = {sizeof(pcl_kmemchan_t), sizeof(pcl_kportchan_t),
                               sizeof(pcl_kremote_t), sizeof(pcl_kop_t), sizeof(pcl_kref_t)};
    const uint4 *g = (const uint4 *)gb;
    if (threadIdx.x == 0)
      pcl_ksmem[0] = g[0]; /* the header: counts */
#pragma unroll
    for (int k = 0; k < 5; k++) {
      uint32_t lo = offs[k] / 16, hi = (offs[k] + counts[k] * sizes[k] + 15) / 16;
      for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        pcl_ksmem[i] = g[i];
    }
  }
  if (threadIdx.x == 0) {
    flag64 = *(volatile uint64_t *)&a.state->flag + 1;
    uint32_t flag = (uint32_t)flag64;
    ctx.b = (const pcl_kblock_t *)pcl_ksmem;
    ctx.odd = flag & 1u;
    ctx.base[PCL_KBUF_INPUT] = (char *)(uintptr_t)a.in;
    ctx.base[PCL_KBUF_OUTPUT] = (char *)(uintptr_t)a.out;
    ctx.base[PCL_KBUF_SCRATCH] = (char *)(uintptr_t)a.scratch + (ctx.odd ? a.scratch_half : 0);
    ctx.scratch_odd = a.scratch_half;
    ctx.state = a.state;
    ctx.sems = a.sems;
    ctx.flag = flag;
    ctx.nranks = a.nranks;
    ctx.redop = a.redop;
    ctx.pkt = a.pkt;
  }
  __syncthreads();
  pcl_kwatch_t w;
  pcl_kwatch_init(&w, &a);
  const pcl_kctx_t *c = &ctx;
  const int nops = c->b->nops;
  for (int i = 0; i < nops;) {
    const pcl_kop_t *op = &c->b->ops[i];
    if (op->type == PCL_KOP_PIPELINE) {
      pcl_kiter_t it;
      it.unit = op->unit;
      it.wrap = op->scratch_wrap;
      for (uint32_t k = 0; k < op->n_iter; k++) {
        it.off = k * op->unit;
        for (int j = 1; j <= op->n_inner; j++)
          pcl_kop_exec<T>(c, &c->b->ops[i + j], it, &w);
      }
      i += 1 + op->n_inner;
    } else {
      pcl_kiter_t it = {0, 0, 0};
      pcl_kop_exec<T>(c, op, it, &w);
      i++;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&a.state->done, 1u) == gridDim.x - 1) {
      /* Last block: every block already read the flag. */
      a.state->done = 0;
      *(volatile uint64_t *)&a.state->flag = flag64;
      __threadfence();
    }
  }
}

/* avg, the simulator's definition: after the plan ran with sum, the rank's result region is
 * scaled by 1/n (floats, in their compute type) or divided by n (integers, truncating). */
template <typename T> __global__ void pcl_kavg(char *buf, uint64_t count, uint32_t n) {
  T *p = (T *)buf;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count;
       i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pcl_kavg_final<T>(p[i], n);
}

typedef void (*pcl_kfn_t)(pcl_kargs_t);
typedef void (*pcl_kavg_fn_t)(char *, uint64_t, uint32_t);

static const struct {
  int dtype;
  size_t bytes;
  pcl_kfn_t fn;
  pcl_kavg_fn_t avg;
} pcl_ktable[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes) {nccl, nbytes, pcl_kexec<ctype>, pcl_kavg<ctype>},
#include "types.def"
#undef PCL_KDTYPE
};
#define PCL_KTABLE_N (sizeof(pcl_ktable) / sizeof(pcl_ktable[0]))

static int kindex(ncclDataType_t dtype) {
  for (size_t i = 0; i < PCL_KTABLE_N; i++)
    if (pcl_ktable[i].dtype == (int)dtype)
      return (int)i;
  return -1;
}

/* ---- the launch path ----
 * cudaLaunchKernel costs more host time than the driver's cuLaunchKernel (the runtime maps the
 * host stub to the kernel of the current device on every call), and a planned call is one
 * launch, so launches go through cuLaunchKernel with the kernels' context-independent handles
 * (cudaGetKernel: a CUkernel, valid on every device; the driver takes the context from the
 * stream), resolved once at the first pcl_kernels_load_all. cuLaunchKernel on a capturing stream
 * records a kernel node, exactly like cudaLaunchKernel, so CUDA graph capture is unchanged.
 * The driver is reached only through cudaGetDriverEntryPointByVersion (libcuda is never linked).
 * When an entry point or handle is unavailable, or PLANCCL_LAUNCH_RUNTIME=1, every launch uses
 * cudaLaunchKernel. */
typedef CUresult (*pcl_cu_launch_fn_t)(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                       CUstream stream, void **params, void **extra);

/* g_cu_kexec/g_cu_kavg are written before g_cu_launch is published (release) and never after;
 * launchers load g_cu_launch (acquire) first, so a non-NULL pointer implies a complete table. */
static CUfunction g_cu_kexec[PCL_KTABLE_N], g_cu_kavg[PCL_KTABLE_N];
static pcl_cu_launch_fn_t g_cu_launch;
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;
static int g_cu_fallbacks; /* driver refusals the runtime then launched */
#define PCL_CU_MAX_FALLBACKS 64

/* Resolution failures are not errors: the runtime path works everywhere. */
static void cu_launch_resolve(void) {
  if (pcl_param_launch_runtime()) {
    PCL_INFO(PCL_LOG_EXEC,
             "interpreter kernels launch with cudaLaunchKernel (PLANCCL_LAUNCH_RUNTIME=1)");
    return;
  }
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  /* 12.0: the ABI whose cuLaunchKernel accepts CUkernel handles. */
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault,
                                                   &q);
  for (size_t i = 0; e == cudaSuccess && i < PCL_KTABLE_N; i++) {
    cudaKernel_t k = NULL, kavg = NULL;
    e = cudaGetKernel(&k, (const void *)pcl_ktable[i].fn);
    if (e == cudaSuccess)
      e = cudaGetKernel(&kavg, (const void *)pcl_ktable[i].avg);
    g_cu_kexec[i] = (CUfunction)k;
    g_cu_kavg[i] = (CUfunction)kavg;
    if (e == cudaSuccess && (k == NULL || kavg == NULL))
      e = cudaErrorInvalidDeviceFunction;
  }
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == NULL) {
    (void)cudaGetLastError(); /* leave no error behind for the application */
    PCL_INFO(PCL_LOG_EXEC, "interpreter kernels launch with cudaLaunchKernel: driver launch "
             "unavailable (%s, entry point query %d)", cudaGetErrorString(e), (int)q);
    return;
  }
  __atomic_store_n(&g_cu_launch, (pcl_cu_launch_fn_t)fn, __ATOMIC_RELEASE);
  PCL_INFO(PCL_LOG_EXEC, "interpreter kernels launch with the driver's cuLaunchKernel");
}

/* One launch: the driver when resolved, else (or when the driver refuses) the runtime. A driver
 * launch error is detected before anything is queued, so retrying through the runtime never
 * launches twice; the retry covers a thread with no current context on the legacy NULL stream
 * (the runtime makes the device's primary context current) and reports real errors with their
 * runtime text. Should the driver keep refusing what the runtime accepts, the driver path is
 * given up for the process (paying for two launch attempts per call would be worse). */
static ncclResult_t launch(const CUfunction *cu_table, int i, const void *rt_fn, unsigned grid,
                           unsigned block, void **params, unsigned smem, cudaStream_t stream,
                           const char *what) {
  pcl_cu_launch_fn_t cu = __atomic_load_n(&g_cu_launch, __ATOMIC_ACQUIRE);
  if (cu != NULL) {
    /* The handle is read after the acquire: the table is complete once g_cu_launch is set. */
    CUresult r = cu(cu_table[i], grid, 1, 1, block, 1, 1, smem, (CUstream)stream, params, NULL);
    if (r == CUDA_SUCCESS)
      return ncclSuccess;
    cudaError_t e = cudaLaunchKernel(rt_fn, dim3(grid), dim3(block), params, smem, stream);
    if (e != cudaSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "%s launch failed: %s (driver: CUresult %d)", what,
               cudaGetErrorString(e), (int)r);
      return ncclUnhandledCudaError;
    }
    int n = __atomic_add_fetch(&g_cu_fallbacks, 1, __ATOMIC_RELAXED);
    if (n == 1 || n == PCL_CU_MAX_FALLBACKS)
      PCL_INFO(PCL_LOG_EXEC, "%s: cuLaunchKernel failed (CUresult %d) where cudaLaunchKernel "
               "worked%s", what, (int)r,
               n == PCL_CU_MAX_FALLBACKS ? "; launching with cudaLaunchKernel from now on" : "");
    if (n == PCL_CU_MAX_FALLBACKS)
      __atomic_store_n(&g_cu_launch, (pcl_cu_launch_fn_t)NULL, __ATOMIC_RELAXED);
    return ncclSuccess;
  }
  cudaError_t e = cudaLaunchKernel(rt_fn, dim3(grid), dim3(block), params, smem, stream);
  if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_EXEC, "%s launch failed: %s", what, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

extern "C" int pcl_kernels_dtype_supported(ncclDataType_t dtype) {
  return kindex(dtype) >= 0;
}

extern "C" int pcl_kernels_redop_supported(ncclDataType_t dtype, ncclRedOp_t op) {
  if (kindex(dtype) < 0)
    return 0;
  switch ((int)op) {
#define PCL_KREDOP(suffix, nccl) case nccl:
#include "types.def"
#undef PCL_KREDOP
    return 1;
  default:
    return 0;
  }
}

extern "C" int pcl_kernels_pkt_reduce_supported(ncclDataType_t dtype, pcl_kpkt_t pkt) {
  int i = kindex(dtype);
  if (i < 0)
    return 0;
  size_t payload = 0;
#define PCL_KPKT(suffix, value, pkt_bytes, payload_bytes)                                          \
  if (pkt == value)                                                                                \
    payload = payload_bytes;
#include "types.def"
#undef PCL_KPKT
  return payload != 0 && payload % pcl_ktable[i].bytes == 0;
}

extern "C" size_t pcl_kernels_dtype_bytes(ncclDataType_t dtype) {
  int i = kindex(dtype);
  return i < 0 ? 0 : pcl_ktable[i].bytes;
}

extern "C" size_t pcl_kernels_smem_bytes(void) {
  return sizeof(pcl_kblock_t);
}

extern "C" ncclResult_t pcl_kernels_load_all(void) {
  for (size_t i = 0; i < PCL_KTABLE_N; i++) {
    struct cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, (const void *)pcl_ktable[i].fn);
    struct cudaFuncAttributes attr_avg;
    if (e == cudaSuccess)
      e = cudaFuncGetAttributes(&attr_avg, (const void *)pcl_ktable[i].avg);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute((const void *)pcl_ktable[i].fn,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)sizeof(pcl_kblock_t));
    if (e != cudaSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "loading the interpreter kernel for dtype %d failed: %s",
               pcl_ktable[i].dtype, cudaGetErrorString(e));
      return ncclUnhandledCudaError;
    }
    if (attr.maxThreadsPerBlock < 1024)
      PCL_INFO(PCL_LOG_EXEC, "interpreter for dtype %d: at most %d threads per block",
               pcl_ktable[i].dtype, attr.maxThreadsPerBlock);
  }
  /* The dynamic shared memory (sizeof(pcl_kblock_t), under the 48 KiB default) needs no opt-in
   * attribute on either path; the attribute above only records the size. */
  pthread_once(&g_cu_once, cu_launch_resolve);
  return ncclSuccess;
}

extern "C" ncclResult_t pcl_kernels_launch(ncclDataType_t dtype, const pcl_kargs_t *args,
                                           int nblocks, int nthreads, cudaStream_t stream) {
  int i = kindex(dtype);
  if (i < 0 || nblocks <= 0 || nblocks > PCL_KABI_MAX_BLOCKS || nthreads <= 0 || nthreads > 1024) {
    PCL_WARN(PCL_LOG_EXEC, "bad launch: dtype %d, %d blocks of %d threads", (int)dtype, nblocks,
             nthreads);
    return ncclInvalidArgument;
  }
  void *params[1] = {(void *)args};
  return launch(g_cu_kexec, i, (const void *)pcl_ktable[i].fn, (unsigned)nblocks,
                (unsigned)nthreads, params, (unsigned)sizeof(pcl_kblock_t), stream, "interpreter");
}

extern "C" ncclResult_t pcl_kernels_launch_avg(ncclDataType_t dtype, void *buf, uint64_t bytes,
                                               int nranks, cudaStream_t stream) {
  int i = kindex(dtype);
  if (i < 0 || nranks <= 0 || bytes % pcl_ktable[i].bytes != 0) {
    PCL_WARN(PCL_LOG_EXEC, "bad avg launch: dtype %d, %llu bytes, %d ranks", (int)dtype,
             (unsigned long long)bytes, nranks);
    return ncclInvalidArgument;
  }
  uint64_t count = bytes / pcl_ktable[i].bytes;
  if (count == 0)
    return ncclSuccess;
  uint64_t blocks = (count + 511) / 512;
  if (blocks > 1024)
    blocks = 1024;
  uint32_t n = (uint32_t)nranks;
  void *params[3] = {(void *)&buf, (void *)&count, (void *)&n};
  return launch(g_cu_kavg, i, (const void *)pcl_ktable[i].avg, (unsigned)blocks, 512, params, 0,
                stream, "avg");
}
