/* SPDX-License-Identifier: MIT
 * What every planccl kernel shares at its ends: the phase timers of PCL_KPROF builds, the start of
 * the kernels that run a packed program, and the end of a call (avg post-scale, then this block's
 * flag slots; protocols in kernel_abi.h). */
#ifndef PCL_EXEC_END_CUH
#define PCL_EXEC_END_CUH

#include "exec_ll.cuh"

#ifdef PCL_KPROF
#define PCL_KPROF_STAMP(var) uint64_t var = clock64()
/* Entry of every kernel: the timers' start and the per-op stamps of block 0. */
#define PCL_KPROF_ENTRY                                                                            \
  const uint64_t prof_ns0 = pcl_kglobaltimer();                                                    \
  PCL_KPROF_STAMP(prof_clk0);                                                                      \
  uint64_t prof_op[PCL_KABI_MAX_OPS]
/* Exit of every kernel after n top-level ops: block 0 adds its phases to the totals. */
#define PCL_KPROF_EXIT(n)                                                                          \
  do {                                                                                             \
    if (blockIdx.x == 0 && threadIdx.x == 0 && a.prof != NULL)                                     \
      pcl_kprof_end(a.prof, prof_ns0, prof_clk0, prof_ready, prof_op, (n),                         \
                    (n) > 0 ? prof_op[min((n), PCL_KABI_MAX_OPS) - 1] : prof_ready);               \
  } while (0)
#else
#define PCL_KPROF_STAMP(var)
#define PCL_KPROF_EXIT(n)                                                                          \
  do {                                                                                             \
  } while (0)
#define PCL_KPROF_ENTRY                                                                            \
  do {                                                                                             \
  } while (0)
#endif

#ifdef PCL_KPROF
/* Block 0's phases of this call, added to the context's totals (kernel_abi.h, pcl_kprof_t). */
static __device__ void pcl_kprof_end(pcl_kprof_t *p, uint64_t ns0, uint64_t clk0,
                                     uint64_t clk_ready, const uint64_t *clk_op, int nops,
                                     uint64_t clk_last) {
  uint64_t clk_end = clock64(), ns_end = pcl_kglobaltimer();
  p->calls++;
  p->ns_total += ns_end - ns0;
  p->clk_total += clk_end - clk0;
  p->clk_ready += clk_ready - clk0;
  uint64_t prev = clk_ready;
  for (int i = 0; i < nops && i < PCL_KABI_MAX_OPS; i++) {
    p->clk_op[i] += clk_op[i] - prev;
    prev = clk_op[i];
  }
  p->clk_tail += clk_end - clk_last;
  if (p->last_end_ns != 0 && ns0 > p->last_end_ns && ns0 - p->last_end_ns < 1000000) {
    p->ns_gap += ns0 - p->last_end_ns;
    p->gaps++;
  }
  p->last_end_ns = ns_end;
  p->nops = (uint32_t)nops;
}
#endif

/* Programmatic dependent launch (PLANCCL_PDL, kernels/exec_kernel.cu's launch): a kernel
 * launched with it may start while the previous kernel of its stream still runs, so it must
 * not touch memory that kernel writes (flag slots, scratch, user buffers) before
 * pcl_kdep_wait(), which returns once that kernel has ended and its writes are visible; the
 * program and descriptors (written by the host before the launch was queued) may be read
 * first. Without the launch attribute both instructions do nothing, and the kernels issue
 * neither (pcl_kpdl below). */
static __device__ __forceinline__ void pcl_kdep_wait(void) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
/* Whether this launch used PDL. Kernels built without -DPCL_PDL=ON compile every PDL path out:
 * present but never taken, they made each plan's kernel 0.05-0.19 us slower (refbench, H200;
 * docs/performance.md), and such builds never launch with PDL (kernels.h). */
static __device__ __forceinline__ bool pcl_kpdl(const pcl_kargs_t &a) {
#ifdef PCL_KERNELS_PDL
  return (a.launch & PCL_KLAUNCH_PDL) != 0;
#else
  (void)a;
  return false;
#endif
}
/* Lets the next kernel of the stream start (it then waits in pcl_kdep_wait for this one to
 * end). Issued once every thread of the block is past its last wait on a peer (hence the
 * barrier: one thread's trigger counts for its block): a dependent grid is launched once every
 * block of this grid has triggered, so it can never hold SMs that a peer's grid of THIS call
 * still needs (every peer block this grid waited for had already run its puts), and what this
 * grid still does (the avg barrier over its own resident blocks, the flag stores) needs nothing
 * from anyone: the executor's co-residency rule is unchanged. `synced`: the caller has just
 * synchronised the block. */
static __device__ __forceinline__ void pcl_kdep_trigger(const pcl_kargs_t &a, bool synced) {
  if (pcl_kpdl(a)) {
    if (!synced)
      __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
}

/* The start of the kernels that run a packed program (the interpreter, the LL and Simple kernels):
 * thread 0 loads this block's flag slot (written by the previous call's kernel) while every thread
 * copies its share of the block's packed program (written by the host before the launch): one round
 * of independent loads. Launched with PDL (-DPCL_PDL=ON builds only: pcl_kpdl), the flag load must
 * follow pcl_kdep_wait and the program may be read before it. The caller's __syncthreads makes both
 * visible. */
static __device__ __forceinline__ void pcl_kstart(const pcl_kargs_t &a, uint4 *smem,
                                                  uint64_t *flag64) {
  const uint4 *g = (const uint4 *)a.blocks + (size_t)blockIdx.x * (a.stride / 16);
  const uint32_t n = a.stride / 16u;
  if (!pcl_kpdl(a)) {
    if (threadIdx.x == 0)
      *flag64 = *(volatile uint64_t *)&a.state->flag[blockIdx.x % PCL_KABI_FLAG_SLOTS] + 1;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
      smem[i] = g[i];
    return;
  }
  /* The first unit is held in a register across the wait, so thread 0's flag load is issued
   * while it is in flight (storing it first would wait for it: two round trips, not one). */
  uint4 first = make_uint4(0, 0, 0, 0);
  if (threadIdx.x < n)
    first = g[threadIdx.x];
  pcl_kdep_wait();
  if (threadIdx.x == 0)
    *flag64 = *(volatile uint64_t *)&a.state->flag[blockIdx.x % PCL_KABI_FLAG_SLOTS] + 1;
  if (threadIdx.x < n)
    smem[threadIdx.x] = first;
  for (uint32_t i = threadIdx.x + blockDim.x; i < n; i += blockDim.x)
    smem[i] = g[i];
}

/* The base of ref r's buffer in this call (this call's scratch half applied) and, in *kind, the
 * buffer it is (a remote ref: the peer's buffer kind), for the kernels that resolve their refs
 * once per call (the LL and Simple kernels). */
static __device__ __forceinline__ char *pcl_kref_base(const pcl_kargs_t &a,
                                                      const pcl_kremote_t *remote,
                                                      const pcl_kref_t *r, uint32_t odd,
                                                      uint32_t *kind) {
  *kind = r->kind;
  if (r->kind == PCL_KBUF_REMOTE) {
    const pcl_kremote_t *rm = &remote[r->slot];
    *kind = rm->kind;
    return (char *)(uintptr_t)rm->ptr + (odd ? rm->odd_half : 0);
  }
  if (r->kind == PCL_KBUF_SCRATCH)
    return (char *)(uintptr_t)a.scratch + (odd ? a.scratch_half : 0);
  return (char *)(uintptr_t)(r->kind == PCL_KBUF_INPUT ? a.in : a.out);
}

/* The avg barrier, with the calling kernel's spin watchdog. */
static __device__ __forceinline__ void pcl_kend_barrier(pcl_kbarrier_t *b, uint32_t n,
                                                        pcl_kwatch_t *w) {
  pcl_kgrid_barrier(b, n, w);
}
static __device__ __forceinline__ void pcl_kend_barrier(pcl_kbarrier_t *b, uint32_t n,
                                                        pcl_kll_watch_t *w) {
  pcl_kgrid_barrier_t(b, n, w);
}

/* The end of a call, every kernel: the avg post-scale (the simulator's definition: the rank's
 * result region scaled once every block's ops are done; every block is resident, which the
 * executor checks), then this block's flag slots. Precondition: every thread of the block has
 * read its flag slot already (the interpreter and the LL kernel: thread 0 before their first
 * __syncthreads; the elementwise kernel synchronises before calling this: `synced`). Nothing
 * here waits for the slot stores: only later kernels of the stream read them. */
template <typename T, typename WATCH>
static __device__ __forceinline__ void pcl_kexec_end(const pcl_kargs_t &a, uint64_t flag64,
                                                     WATCH *w, bool synced) {
  pcl_kdep_trigger(a, synced);
  if (a.avg_count != 0) {
    if (gridDim.x > 1)
      pcl_kend_barrier(&a.state->avg_barrier, gridDim.x, w);
    else
      __syncthreads();
    T *p = (T *)(uintptr_t)a.avg_out;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < a.avg_count;
         i += (uint64_t)gridDim.x * blockDim.x)
      p[i] = pcl_kavg_final<T>(p[i], a.nranks);
  }
  if (gridDim.x <= PCL_KABI_FLAG_SLOTS) {
    for (uint32_t j = blockIdx.x + threadIdx.x * gridDim.x; j < PCL_KABI_FLAG_SLOTS;
         j += gridDim.x * blockDim.x)
      a.state->flag[j] = flag64;
    return;
  }
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&a.state->done, 1u) == gridDim.x - 1) {
    a.state->done = 0; /* every block of the grid already read its flag */
    for (uint32_t j = 0; j < PCL_KABI_FLAG_SLOTS; j++)
      a.state->flag[j] = flag64;
  }
}

#endif
