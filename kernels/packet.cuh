/* SPDX-License-Identifier: MIT
 * Device primitives: LL16/LL8 packet stores and polls, semaphore atomics with explicit scopes,
 * and the spin watchdog (abort flag, recorded errors, PLANCCL_TIMEOUT_S) every spin loop uses. */
#ifndef PCL_PACKET_CUH
#define PCL_PACKET_CUH

#include <stdint.h>
#include "kernel_abi.h"

/* ---- spin watchdog ----
 * Every spin calls pcl_kwatch_tick once per iteration; every 256 iterations it reads the abort
 * flag and the error word (both in host-mapped memory, so they are read rarely) and the global
 * nanosecond timer. On abort or timeout it records the error (first one wins) and returns 1: the
 * caller stops waiting and goes on with garbage, so every thread reaches the same
 * __syncthreads and the kernel ends; the host reports the error. Once any thread recorded an
 * error, every later spin gives up at its first check. */
typedef struct {
  const volatile uint32_t *abort_flag;
  uint32_t *error;
  uint64_t timeout_ns;
  uint64_t start;
  uint32_t n;
  uint32_t dead;
  /* For the hang report only (kernel_abi.h, pcl_khang_t): set on the slow path of each wait. */
  const void *prog, *at;
  uint32_t want, op, what;
} pcl_kwatch_t;

static __device__ __forceinline__ uint64_t pcl_kglobaltimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ __forceinline__ void pcl_kwatch_init(pcl_kwatch_t *w, const pcl_kargs_t *a) {
  w->abort_flag = a->abort_flag;
  w->error = a->error;
  w->timeout_ns = a->timeout_ns;
  w->start = 0;
  w->n = 0;
  w->dead = 0;
  w->prog = a->blocks;
  w->at = NULL;
  w->want = w->op = w->what = 0;
}

/* What a wait is about to spin on, for the hang report; either watch type (pcl_kll_watch_t has
 * the same fields). Called on slow paths only. */
template <typename WATCH>
static __device__ __forceinline__ void pcl_kwait_on(WATCH *w, const void *at, uint32_t want,
                                                    uint32_t what) {
  w->at = at;
  w->want = want;
  w->what = what;
}

/* Called once per context by the thread whose atomicCAS set the error word (kernel_abi.h). Out
 * of line: the error path stays out of the spin loops' code. */
static __device__ __noinline__ void pcl_khang_record(uint32_t *error, uint32_t err,
                                                     const void *prog, uint32_t op, uint32_t what,
                                                     const void *at, uint32_t want,
                                                     uint64_t waited_ns) {
  pcl_khang_t *h = (pcl_khang_t *)((char *)error + PCL_KHANG_OFFSET);
  uint32_t found = 0;
  if (at != NULL) {
    if (what == PCL_KWAIT_LL16 || what == PCL_KWAIT_LL8)
      found = ((const volatile uint32_t *)at)[1]; /* the (first) flag word of the packet */
    else if (what == PCL_KWAIT_FIFO || what == PCL_KWAIT_INBOUND)
      found = (uint32_t) * (const volatile uint64_t *)at;
    else
      found = *(const volatile uint32_t *)at;
  }
  h->err = err;
  h->block = blockIdx.x;
  h->thread = threadIdx.x;
  h->op = op;
  h->what = what;
  h->want = want;
  h->found = found;
  h->at = (uint64_t)(uintptr_t)at;
  h->prog = (uint64_t)(uintptr_t)prog;
  h->waited_ns = waited_ns;
  __threadfence_system();
  *(volatile uint32_t *)&h->valid = 1u;
}

static __device__ __noinline__ int pcl_kwatch_check(pcl_kwatch_t *w) {
  if (w->dead)
    return 1;
  uint32_t err = 0;
  if (w->abort_flag != NULL && *w->abort_flag != 0)
    err = PCL_KERR_ABORT;
  if (err == 0 && w->error != NULL && *(volatile uint32_t *)w->error != 0) {
    w->dead = 1;
    return 1;
  }
  if (err == 0 && w->timeout_ns != 0) {
    uint64_t now = pcl_kglobaltimer();
    if (w->start == 0)
      w->start = now;
    else if (now - w->start > w->timeout_ns)
      err = PCL_KERR_TIMEOUT;
  }
  if (err == 0)
    return 0;
  if (w->error != NULL && atomicCAS((unsigned int *)w->error, 0u, err) == 0u)
    pcl_khang_record(w->error, err, w->prog, w->op, w->what, w->at, w->want,
                     w->start ? pcl_kglobaltimer() - w->start : 0);
  __threadfence_system();
  w->dead = 1;
  return 1;
}

/* Starts a new wait: the timeout counts from the first check of this wait. */
static __device__ __forceinline__ void pcl_kwatch_begin(pcl_kwatch_t *w) {
  w->start = 0;
  w->n = 0;
}

static __device__ __forceinline__ int pcl_kwatch_tick(pcl_kwatch_t *w) {
  if ((++w->n & 255u) != 0 && !w->dead)
    return 0;
  return pcl_kwatch_check(w);
}

/* ---- LL16 ----
 * One 16-byte volatile store {data.x, flag, data.y, flag}; NVLink/PCIe deliver each aligned
 * 8-byte half atomically, so a reader that sees both flags sees both data words. */
static __device__ __forceinline__ void pcl_ll16_store(void *p, uint2 v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(flag),
               "r"(v.y), "r"(flag)
               : "memory");
}

/* 1 and *v when the packet at p carries flag. */
static __device__ __forceinline__ int pcl_ll16_read(const void *p, uint32_t flag, uint2 *v) {
  uint32_t d1, f1, d2, f2;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2)
               : "l"(p)
               : "memory");
  v->x = d1;
  v->y = d2;
  return (f1 == flag) & (f2 == flag);
}

/* ---- LL8: one 8-byte volatile store {data, flag} ---- */
static __device__ __forceinline__ void pcl_ll8_store(void *p, uint32_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v), "r"(flag) : "memory");
}

static __device__ __forceinline__ int pcl_ll8_read(const void *p, uint32_t flag, uint32_t *v) {
  uint32_t d, f;
  asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(d), "=r"(f) : "l"(p) : "memory");
  *v = d;
  return f == flag;
}

/* Spins until the LL16 packet at p carries flag; returns its payload (garbage on give-up). */
static __device__ __forceinline__ uint2 pcl_ll16_wait(const void *p, uint32_t flag,
                                                      pcl_kwatch_t *w) {
  uint2 v;
  if (pcl_ll16_read(p, flag, &v))
    return v;
  pcl_kwait_on(w, p, flag, PCL_KWAIT_LL16);
  pcl_kwatch_begin(w);
  while (!pcl_ll16_read(p, flag, &v)) {
    if (pcl_kwatch_tick(w))
      break;
  }
  return v;
}

static __device__ __forceinline__ uint32_t pcl_ll8_wait(const void *p, uint32_t flag,
                                                        pcl_kwatch_t *w) {
  uint32_t v;
  if (pcl_ll8_read(p, flag, &v))
    return v;
  pcl_kwait_on(w, p, flag, PCL_KWAIT_LL8);
  pcl_kwatch_begin(w);
  while (!pcl_ll8_read(p, flag, &v)) {
    if (pcl_kwatch_tick(w))
      break;
  }
  return v;
}

/* ---- semaphore atomics (system scope: the peer is another GPU or the host proxy) ---- */
static __device__ __forceinline__ void pcl_katomic_add_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ void pcl_katomic_add_relaxed_sys(uint64_t *p, uint64_t v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

static __device__ __forceinline__ uint64_t pcl_kload_acquire_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ uint64_t pcl_kload_relaxed_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* Waits until *inbound >= ++*expected (one waiter per channel owns *expected). */
static __device__ __forceinline__ void pcl_ksem_wait(uint64_t *inbound, uint64_t *expected,
                                                     int relaxed, pcl_kwatch_t *w) {
  uint64_t e = *expected + 1;
  *expected = e;
  pcl_kwait_on(w, inbound, (uint32_t)e, PCL_KWAIT_INBOUND);
  pcl_kwatch_begin(w);
  for (;;) {
    uint64_t v = relaxed ? pcl_kload_relaxed_sys(inbound) : pcl_kload_acquire_sys(inbound);
    if ((int64_t)(v - e) >= 0)
      break;
    if (pcl_kwatch_tick(w))
      break;
  }
}

#endif
