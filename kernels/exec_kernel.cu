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
#include "exec_end.cuh"
#include "exec_ew.h"
#include "exec_simple.h"
extern "C" {
#include "log.h"
#include "param.h"
}

/* Copies this block's packed program into shared memory, runs its ops, then advances this
 * block's flag slots (both protocols in kernel_abi.h). One __syncthreads before the first op. */
template <typename T>
__global__ void __launch_bounds__(1024, 1) pcl_kexec(const __grid_constant__ pcl_kargs_t a) {
  extern __shared__ uint4 pcl_ksmem[];
  __shared__ uint64_t flag64;
  PCL_KPROF_ENTRY;
  pcl_kstart(a, pcl_ksmem, &flag64);
  __syncthreads();
  /* Every thread builds its own (identical) context from the header: no second barrier. */
  pcl_kctx_t ctx;
  {
    const uint32_t flag = pcl_kflag32(flag64);
    const pcl_kblock_t *hdr = (const pcl_kblock_t *)pcl_ksmem;
    uint32_t off[5], bytes;
    pcl_kpack_offsets(hdr, off, &bytes);
    const char *base = (const char *)pcl_ksmem;
    ctx.mem = (const pcl_kmemchan_t *)(base + off[0]);
    ctx.port = (const pcl_kportchan_t *)(base + off[1]);
    ctx.remote = (const pcl_kremote_t *)(base + off[2]);
    ctx.ops = (const pcl_kop_t *)(base + off[3]);
    ctx.refs = (const pcl_kref_t *)(base + off[4]);
    ctx.nops = hdr->nops;
    ctx.odd = (uint32_t)flag64 & 1u;
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
  PCL_KPROF_STAMP(prof_ready);
  pcl_kwatch_t w;
  pcl_kwatch_init(&w, &a);
  const pcl_kctx_t *c = &ctx;
  const int nops = c->nops;
  int top = 0; /* top-level ops run (profiling) */
  for (int i = 0; i < nops; top++) {
    const pcl_kop_t *op = &c->ops[i];
    if (op->type == PCL_KOP_PIPELINE) {
      pcl_kiter_t it;
      it.unit = op->unit;
      it.wrap = op->scratch_wrap;
      for (uint32_t k = 0; k < op->n_iter; k++) {
        it.off = k * op->unit;
        for (int j = 1; j <= op->n_inner; j++) {
          w.op = (uint32_t)(i + j);
          pcl_kop_exec<T>(c, &c->ops[i + j], it, &w);
        }
      }
      i += 1 + op->n_inner;
    } else {
      pcl_kiter_t it = {0, 0, 0};
      w.op = (uint32_t)i;
      pcl_kop_exec<T>(c, op, it, &w);
      i++;
    }
#ifdef PCL_KPROF
    if (top < PCL_KABI_MAX_OPS)
      prof_op[top] = clock64();
#endif
  }
  (void)top;
  const uint64_t f = flag64;
  pcl_kexec_end<T>(a, f, &w, false);
  PCL_KPROF_EXIT(top);
}

/* The LL fast path (exec_ll.cuh): the same prologue, refs resolved once into shared memory, then
 * the ops on a short straight-line path. The executor picks it for programs of packet ops only
 * (pcl_exec_ll_eligible); results are the interpreter's, bit for bit. Built twice per dtype:
 * MAXT = PCL_KABI_LL_MAX_THREADS (the register budget it was tuned for) and 1024 (the wide form,
 * for plans of 1024 threads over large ranges: every op is a loop strided by blockDim, so only
 * the register budget differs). */
template <typename T, int MAXT>
__global__ void __launch_bounds__(MAXT) pcl_kexec_ll(const __grid_constant__ pcl_kargs_t a) {
  extern __shared__ uint4 pcl_ksmem[];
  __shared__ uint64_t flag64;
  __shared__ pcl_kll_refs_t refs;
  PCL_KPROF_ENTRY;
  pcl_kstart(a, pcl_ksmem, &flag64);
  __syncthreads();
  const uint64_t f64 = flag64;
  const uint32_t flag = pcl_kflag32(f64), odd = (uint32_t)f64 & 1u;
  const pcl_kblock_t *hdr = (const pcl_kblock_t *)pcl_ksmem;
  uint32_t off[5], bytes;
  pcl_kpack_offsets(hdr, off, &bytes);
  const char *base = (const char *)pcl_ksmem;
  const pcl_kremote_t *remote = (const pcl_kremote_t *)(base + off[2]);
  const pcl_kop_t *ops = (const pcl_kop_t *)(base + off[3]);
  const pcl_kref_t *kref = (const pcl_kref_t *)(base + off[4]);
  const int nops = hdr->nops;
  for (uint32_t t = threadIdx.x; t < hdr->nrefs; t += blockDim.x) {
    const pcl_kref_t *r = &kref[t];
    uint32_t kind;
    char *b = pcl_kref_base(a, remote, r, odd, &kind);
    refs.plain[t] = b + r->offset;
    refs.pkt[t] = b + (uint64_t)r->offset * PCL_KABI_PKT_RATIO;
    refs.size[t] = r->size;
  }
  __syncthreads();
  PCL_KPROF_STAMP(prof_ready);
  pcl_kll_watch_t w = pcl_kll_watch_make(a, 0);
  int i = 0;
  if (hdr->flags & PCL_KBLOCK_FUSED_PPKT_REPKT) {
    if (a.pkt == PCL_KPKT_LL16)
      pcl_kll_fused_any<T, uint2>(ops, a.redop, &refs, flag, &w);
    else
      pcl_kll_fused_any<T, uint32_t>(ops, a.redop, &refs, flag, &w);
#ifdef PCL_KPROF
    prof_op[0] = prof_op[1] = clock64();
#endif
    i = nops;
  }
  for (; i < nops; i++) {
    const pcl_kop_t *op = &ops[i];
    w.op = (uint32_t)i;
    if (op->type == PCL_KOP_NOP)
      __syncthreads();
    else if (a.pkt == PCL_KPKT_LL16)
      pcl_kll_op_any<T, uint2>(op, a.redop, &refs, flag, &w);
    else
      pcl_kll_op_any<T, uint32_t>(op, a.redop, &refs, flag, &w);
#ifdef PCL_KPROF
    if (i < PCL_KABI_MAX_OPS)
      prof_op[i] = clock64();
#endif
  }
  pcl_kexec_end<T>(a, f64, &w, false);
  PCL_KPROF_EXIT(nops);
}

/* The wide LL kernel is built for the types of nearly every reduction (fp32, fp16, bf16). The wide
 * slot of the other dtypes holds the interpreter, whose results are the same bit for bit: built
 * for all twelve, the wide form added about 40% to this file's compile time. */
template <typename T> struct pcl_kwide_built { static constexpr bool value = false; };
template <> struct pcl_kwide_built<float> { static constexpr bool value = true; };
template <> struct pcl_kwide_built<__half> { static constexpr bool value = true; };
template <> struct pcl_kwide_built<__nv_bfloat16> { static constexpr bool value = true; };
template <typename T> static constexpr pcl_kfn_t pcl_kwide_fn() {
  if constexpr (pcl_kwide_built<T>::value)
    return pcl_kexec_ll<T, 1024>;
  else
    return pcl_kexec<T>;
}

/* The interpreter and the LL kernels per dtype; the Simple and EW kernels' rows (exec_simple.cu,
 * exec_ew.cu) are in the same types.def order, which pcl_kernels_load_all checks. */
static const struct {
  int dtype;
  size_t bytes;
  pcl_kfn_t fn[3]; /* PCL_KVAR_INTERP, PCL_KVAR_LL, PCL_KVAR_LL_WIDE */
  bool wide;       /* fn[PCL_KVAR_LL_WIDE] is the wide LL kernel, not the interpreter */
} pcl_ktable[] = {
#define PCL_KDTYPE(suffix, nccl, ctype, nbytes)                                                    \
  {nccl,                                                                                           \
   nbytes,                                                                                         \
   {pcl_kexec<ctype>, pcl_kexec_ll<ctype, PCL_KABI_LL_MAX_THREADS>, pcl_kwide_fn<ctype>()},        \
   pcl_kwide_built<ctype>::value},
#include "types.def"
#undef PCL_KDTYPE
};
#define PCL_KTABLE_N (sizeof(pcl_ktable) / sizeof(pcl_ktable[0]))

/* Every kernel of a dtype has a slot: the interpreter, the LL kernels, the Simple kernel (its own
 * table, exec_simple.cu), then each EW bound's forms (exec_ew.h), then each EWX bound's. A launch
 * names (variant, form); the slot is where both are one number. */
#define PCL_KSLOTS (PCL_KVAR_EW2 + 2 * PCL_KEW_BOUNDS * PCL_KEW_NFORMS)
static int kslot(int v, int form) {
  return v < PCL_KVAR_EW2 ? v : PCL_KVAR_EW2 + (v - PCL_KVAR_EW2) * PCL_KEW_NFORMS + form;
}
static int kslot_variant(int slot) {
  return slot < PCL_KVAR_EW2 ? slot : PCL_KVAR_EW2 + (slot - PCL_KVAR_EW2) / PCL_KEW_NFORMS;
}

/* Kernel of (dtype index, slot). */
static const void *kfn(size_t i, int slot) {
  if (slot == PCL_KVAR_SIMPLE)
    return (const void *)pcl_ksimple_table[i].fn;
  if (slot < PCL_KVAR_EW2)
    return (const void *)pcl_ktable[i].fn[slot];
  slot -= PCL_KVAR_EW2;
  const int row = slot / PCL_KEW_NFORMS, form = slot % PCL_KEW_NFORMS;
  return row < PCL_KEW_BOUNDS ? (const void *)pcl_kew_table[i].fn[row][form]
                              : (const void *)pcl_kewx_table[i].fn[row - PCL_KEW_BOUNDS][form];
}

static const char *const kvar_name[PCL_KVARIANTS] = {
    "interpreter",   "LL kernel",   "LL kernel (1024 threads)",
    "Simple kernel", "EW2 kernel",  "EW4 kernel",
    "EW8 kernel",    "EWX2 kernel", "EWX4 kernel",
    "EWX8 kernel"};

/* Threads per block a variant is built for (__launch_bounds__). */
static int kvar_max_threads(int v) {
  return v == PCL_KVAR_INTERP || v == PCL_KVAR_LL_WIDE || v == PCL_KVAR_SIMPLE
             ? 1024
             : PCL_KABI_LL_MAX_THREADS;
}

/* Dynamic shared memory of a launch: the packed program for the interpreter, the LL and the
 * Simple kernel, none for the EW kernels (they read their descriptor in place). */
static unsigned kvar_smem(int v, unsigned stride) {
  return v < PCL_KVAR_EW2 ? stride : 0u;
}

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

/* g_cu_kexec is written before g_cu_launch is published (release) and never after;
 * launchers load g_cu_launch (acquire) first, so a non-NULL pointer implies a complete table. */
typedef CUresult (*pcl_cu_launch_ex_fn_t)(const CUlaunchConfig *config, CUfunction f, void **params,
                                          void **extra);

static CUfunction g_cu_kexec[PCL_KTABLE_N * PCL_KSLOTS]; /* [dtype index * slots + slot] */
static pcl_cu_launch_fn_t g_cu_launch;
/* cuLaunchKernelEx, for launches with attributes (PDL); written before g_cu_launch is published
 * and read after its acquire, like the table. NULL: such launches go through the runtime. */
static pcl_cu_launch_ex_fn_t g_cu_launch_ex;
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
  cudaError_t e =
      cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &q);
  for (size_t i = 0; e == cudaSuccess && i < PCL_KTABLE_N * PCL_KSLOTS; i++) {
    cudaKernel_t k = NULL;
    e = cudaGetKernel(&k, kfn(i / PCL_KSLOTS, (int)(i % PCL_KSLOTS)));
    g_cu_kexec[i] = (CUfunction)k;
    if (e == cudaSuccess && k == NULL)
      e = cudaErrorInvalidDeviceFunction;
  }
  void *fn_ex = NULL;
  enum cudaDriverEntryPointQueryResult q_ex = cudaDriverEntryPointSymbolNotFound;
  if (e == cudaSuccess &&
      (cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn_ex, 12000, cudaEnableDefault,
                                        &q_ex) != cudaSuccess ||
       q_ex != cudaDriverEntryPointSuccess)) {
    (void)cudaGetLastError();
    fn_ex = NULL; /* PDL launches take the runtime path */
  }
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == NULL) {
    (void)cudaGetLastError(); /* leave no error behind for the application */
    PCL_INFO(PCL_LOG_EXEC,
             "interpreter kernels launch with cudaLaunchKernel: driver launch "
             "unavailable (%s, entry point query %d)",
             cudaGetErrorString(e), (int)q);
    return;
  }
  g_cu_launch_ex = (pcl_cu_launch_ex_fn_t)fn_ex;
  __atomic_store_n(&g_cu_launch, (pcl_cu_launch_fn_t)fn, __ATOMIC_RELEASE);
  PCL_INFO(PCL_LOG_EXEC, "interpreter kernels launch with the driver's cuLaunchKernel");
}

/* One launch: the driver when resolved, else (or when the driver refuses) the runtime. A driver
 * launch error is detected before anything is queued, so retrying through the runtime never
 * launches twice; the retry covers a thread with no current context on the legacy NULL stream
 * (the runtime makes the device's primary context current) and reports real errors with their
 * runtime text. Should the driver keep refusing what the runtime accepts, the driver path is
 * given up for the process (paying for two launch attempts per call would be worse). */
/* Programmatic dependent launch (pdl): the kernel may start while the previous kernel of the
 * stream ends (kernel_abi.h, PCL_KLAUNCH_PDL); captured into a graph it becomes a programmatic
 * edge. Only the launch attribute differs from a plain launch. */
static CUresult cu_launch_pdl(pcl_cu_launch_ex_fn_t ex, CUfunction f, unsigned grid, unsigned block,
                              void **params, unsigned smem, cudaStream_t stream) {
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = grid;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = block;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.hStream = (CUstream)stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return ex(&cfg, f, params, NULL);
}

static cudaError_t rt_launch(const void *rt_fn, unsigned grid, unsigned block, void **params,
                             unsigned smem, cudaStream_t stream, int pdl) {
  if (!pdl)
    return cudaLaunchKernel(rt_fn, dim3(grid), dim3(block), params, smem, stream);
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelExC(&cfg, rt_fn, params);
}

static ncclResult_t launch(const CUfunction *cu_table, int i, const void *rt_fn, unsigned grid,
                           unsigned block, void **params, unsigned smem, cudaStream_t stream,
                           int pdl, const char *what) {
  pcl_cu_launch_fn_t cu = __atomic_load_n(&g_cu_launch, __ATOMIC_ACQUIRE);
  if (cu != NULL && (!pdl || g_cu_launch_ex != NULL)) {
    /* The handle is read after the acquire: the table is complete once g_cu_launch is set. */
    CUresult r =
        pdl ? cu_launch_pdl(g_cu_launch_ex, cu_table[i], grid, block, params, smem, stream)
            : cu(cu_table[i], grid, 1, 1, block, 1, 1, smem, (CUstream)stream, params, NULL);
    if (r == CUDA_SUCCESS)
      return ncclSuccess;
    cudaError_t e = rt_launch(rt_fn, grid, block, params, smem, stream, pdl);
    if (e != cudaSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "%s launch failed: %s (driver: CUresult %d)", what,
               cudaGetErrorString(e), (int)r);
      return ncclUnhandledCudaError;
    }
    int n = __atomic_add_fetch(&g_cu_fallbacks, 1, __ATOMIC_RELAXED);
    if (n == 1 || n == PCL_CU_MAX_FALLBACKS)
      PCL_INFO(PCL_LOG_EXEC,
               "%s: cuLaunchKernel failed (CUresult %d) where cudaLaunchKernel "
               "worked%s",
               what, (int)r,
               n == PCL_CU_MAX_FALLBACKS ? "; launching with cudaLaunchKernel from now on" : "");
    if (n == PCL_CU_MAX_FALLBACKS)
      __atomic_store_n(&g_cu_launch, (pcl_cu_launch_fn_t)NULL, __ATOMIC_RELAXED);
    return ncclSuccess;
  }
  cudaError_t e = rt_launch(rt_fn, grid, block, params, smem, stream, pdl);
  if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_EXEC, "%s launch failed: %s", what, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

extern "C" int pcl_kernels_pdl(void) {
  if (!pcl_param_pdl())
    return 0;
#ifdef PCL_KERNELS_PDL
  return 1;
#else
  static int warned;
  if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    PCL_WARN(PCL_LOG_EXEC, "PLANCCL_PDL=1 ignored: these kernels were built without "
                           "programmatic dependent launch (configure with -DPCL_PDL=ON)");
  return 0;
#endif
}

extern "C" const char *pcl_kernels_variant_name(pcl_kvariant_t v) {
  return (int)v >= 0 && (int)v < PCL_KVARIANTS ? kvar_name[v] : "?";
}

extern "C" const char *pcl_kernels_kernel_name(pcl_kvariant_t v, ncclDataType_t dtype) {
  const int i = kindex(dtype);
  if (v == PCL_KVAR_LL_WIDE && i >= 0 && !pcl_ktable[i].wide)
    return kvar_name[PCL_KVAR_INTERP];
  return pcl_kernels_variant_name(v);
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

extern "C" size_t pcl_kernels_pkt_payload_bytes(pcl_kpkt_t pkt) {
  size_t payload = 0;
#define PCL_KPKT(suffix, value, pkt_bytes, payload_bytes)                                          \
  if (pkt == value)                                                                                \
    payload = payload_bytes;
#include "types.def"
#undef PCL_KPKT
  return payload;
}

extern "C" int pcl_kernels_pkt_reduce_supported(ncclDataType_t dtype, pcl_kpkt_t pkt) {
  int i = kindex(dtype);
  if (i < 0)
    return 0;
  size_t payload = pcl_kernels_pkt_payload_bytes(pkt);
  return payload != 0 && payload % pcl_ktable[i].bytes == 0;
}

extern "C" size_t pcl_kernels_dtype_bytes(ncclDataType_t dtype) {
  int i = kindex(dtype);
  return i < 0 ? 0 : pcl_ktable[i].bytes;
}

/* Answers of pcl_kernels_resident_blocks by (device, block size): asking the driver for every
 * variant takes tens of queries (~0.3 ms), which was most of a new message size's build. The
 * kernels and their shared memory never change, so an answer never goes stale. */
#define PCL_KFIT_MEMO 32
static struct { int dev, nthreads, fit; } kfit_memo[PCL_KFIT_MEMO];
static int kfit_n;
static pthread_mutex_t kfit_lock = PTHREAD_MUTEX_INITIALIZER;

static int resident_blocks_asked(int dev, int nthreads);

extern "C" int pcl_kernels_resident_blocks(int nthreads) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  pthread_mutex_lock(&kfit_lock);
  for (int i = 0; i < kfit_n; i++)
    if (kfit_memo[i].dev == dev && kfit_memo[i].nthreads == nthreads) {
      const int fit = kfit_memo[i].fit;
      pthread_mutex_unlock(&kfit_lock);
      return fit;
    }
  pthread_mutex_unlock(&kfit_lock);
  const int fit = resident_blocks_asked(dev, nthreads);
  pthread_mutex_lock(&kfit_lock);
  if (fit > 0 && kfit_n < PCL_KFIT_MEMO)
    kfit_memo[kfit_n++] = {dev, nthreads, fit}; /* two threads may both add it: harmless */
  pthread_mutex_unlock(&kfit_lock);
  return fit;
}

static int resident_blocks_asked(int dev, int nthreads) {
  int nsm = 0, least = -1;
  if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  for (size_t i = 0; i < PCL_KTABLE_N * PCL_KSLOTS; i++) {
    int per_sm = 0;
    if (nthreads > kvar_max_threads(kslot_variant((int)(i % PCL_KSLOTS))))
      continue; /* never launched with that many threads (exec.c checks the bound) */
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kfn(i / PCL_KSLOTS, (int)(i % PCL_KSLOTS)), nthreads, sizeof(pcl_kblock_t)) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    if (least < 0 || per_sm < least)
      least = per_sm;
  }
  return least < 0 ? 0 : least * nsm;
}

extern "C" ncclResult_t pcl_kernels_load_all(void) {
  if (pcl_kew_table_n != (int)PCL_KTABLE_N || pcl_kewx_table_n != (int)PCL_KTABLE_N ||
      pcl_ksimple_table_n != (int)PCL_KTABLE_N) {
    PCL_WARN(PCL_LOG_EXEC, "kernel tables disagree: %d EW, %d EWX and %d Simple rows for %d dtypes",
             pcl_kew_table_n, pcl_kewx_table_n, pcl_ksimple_table_n, (int)PCL_KTABLE_N);
    return ncclInternalError;
  }
  for (size_t i = 0; i < PCL_KTABLE_N; i++)
    if (pcl_kew_table[i].dtype != pcl_ktable[i].dtype ||
        pcl_kewx_table[i].dtype != pcl_ktable[i].dtype ||
        pcl_ksimple_table[i].dtype != pcl_ktable[i].dtype) {
      PCL_WARN(PCL_LOG_EXEC, "kernel tables disagree on dtype row %d", (int)i);
      return ncclInternalError;
    }
  for (size_t i = 0; i < PCL_KTABLE_N * PCL_KSLOTS; i++) {
    const void *fn = kfn(i / PCL_KSLOTS, (int)(i % PCL_KSLOTS));
    const int v = kslot_variant((int)(i % PCL_KSLOTS));
    int dt = pcl_ktable[i / PCL_KSLOTS].dtype;
    struct cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, fn);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)sizeof(pcl_kblock_t));
    if (e != cudaSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "loading the %s (slot %d) for dtype %d failed: %s", kvar_name[v],
               (int)(i % PCL_KSLOTS), dt, cudaGetErrorString(e));
      return ncclUnhandledCudaError;
    }
    if (attr.maxThreadsPerBlock < kvar_max_threads(v))
      PCL_INFO(PCL_LOG_EXEC, "%s for dtype %d: at most %d threads per block", kvar_name[v], dt,
               attr.maxThreadsPerBlock);
  }
  /* The dynamic shared memory (a packed block, at most sizeof(pcl_kblock_t), under the 48 KiB
   * default) needs no opt-in
   * attribute on either path; the attribute above only records the size. */
  pthread_once(&g_cu_once, cu_launch_resolve);
  return ncclSuccess;
}

extern "C" int pcl_kernels_ew_form(ncclRedOp_t op, pcl_kpkt_t pkt, int aligned) {
  static const int ops[] = {
#define PCL_KREDOP(suffix, nccl) nccl,
#include "types.def"
#undef PCL_KREDOP
  };
  if (pcl_kernels_pkt_payload_bytes(pkt) == 0)
    return -1;
  for (int r = 0; r < (int)(sizeof(ops) / sizeof(ops[0])); r++)
    if (ops[r] == (int)op)
      return (r * PCL_KPKT_COUNT + (int)pkt) * 2 + (aligned ? 1 : 0);
  return -1;
}

extern "C" ncclResult_t pcl_kernels_launch(ncclDataType_t dtype, pcl_kvariant_t variant, int form,
                                           const pcl_kargs_t *args, int nblocks, int nthreads,
                                           cudaStream_t stream) {
  int i = kindex(dtype);
  const int ew = (int)variant >= PCL_KVAR_EW2;
  if (i < 0 || (int)variant < 0 || (int)variant >= PCL_KVARIANTS || nblocks <= 0 ||
      nblocks > PCL_KABI_MAX_BLOCKS || nthreads <= 0 || nthreads > kvar_max_threads(variant) ||
      args->stride < 16 || args->stride % 16 != 0 || args->stride > sizeof(pcl_kblock_t) ||
      (ew ? form < 0 || form >= PCL_KEW_NFORMS : form != 0)) {
    PCL_WARN(PCL_LOG_EXEC,
             "bad launch: dtype %d, %d blocks of %d threads, program stride %u, form %d of the %s",
             (int)dtype, nblocks, nthreads, (unsigned)args->stride, form,
             pcl_kernels_variant_name(variant));
    return ncclInvalidArgument;
  }
  void *params[1] = {(void *)args};
  const int slot = kslot((int)variant, form);
  return launch(g_cu_kexec, i * PCL_KSLOTS + slot, kfn((size_t)i, slot), (unsigned)nblocks,
                (unsigned)nthreads, params, kvar_smem((int)variant, args->stride), stream,
                (args->launch & PCL_KLAUNCH_PDL) != 0, kvar_name[variant]);
}
