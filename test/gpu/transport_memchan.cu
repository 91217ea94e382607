/* SPDX-License-Identifier: MIT
 * Memory channels on two GPUs, across processes (forked before any CUDA call, real bootstrap) and
 * inside one process (two threads, direct peer pointers): correctness of put / LL16 packets /
 * signal-wait and of error agreement, ping-pong latency, put and copy-engine bandwidth, and
 * init/destroy cycles with flat GPU memory, RSS and fd counts; the ping-pong also runs in seven
 * variants (plain flag stores, a release store, release/relaxed atomic adds with acquire/relaxed
 * polls) with a minimal spin loop, to show what the one-way latency is made of. Exits 77 with
 * fewer than 2 GPUs.
 * Usage: transport_memchan [--cycles N] [--iters N] [--mib N] [--only proc|thread] */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "memchan.h"
extern "C" {
#include "mem_int.h" /* the driver entry points, to build a multi-segment cuMem buffer */
}

#define NMODES 2 /* 0 = processes, 1 = threads */
/* Ping-pong variants (signal / poll), measured with the same minimal spin loop:
 * the flag as BASELINE.md measured it (a plain store of the sender's count, plain polling), a
 * release store, and the memory channel's release and relaxed atomic adds. */
/* Signal kinds and poll kinds; a variant is one of each. */
enum { SIG_ST_VOLATILE, SIG_ST_RELAXED, SIG_ST_RELEASE, SIG_RED_RELEASE, SIG_RED_RELAXED };
enum { POLL_VOLATILE, POLL_RELAXED, POLL_ACQUIRE };
enum {
  PP_VOLATILE,    /* (a) st.volatile / ld.volatile: BASELINE.md's flag */
  PP_RELAXED_ST,  /* (a) st.relaxed.sys / ld.relaxed.sys */
  PP_RELEASE_ST,  /* (b) st.release.sys / ld.acquire.sys */
  PP_RELEASE_RED, /* (c) red.release.sys.add / ld.acquire.sys: memchan signal/wait */
  PP_RELAXED_RED, /* (d) red.relaxed.sys.add / ld.relaxed.sys: rlxsignal/rlxwait */
  PP_RLXRED_ACQ,  /* (e) red.relaxed.sys.add / ld.acquire.sys: the cost of the acquire poll */
  PP_RELRED_RLX,  /* (f) red.release.sys.add / ld.relaxed.sys: the cost of the release signal */
  NPP
};
static const char *const k_pp_name[NPP] = {
    "(a) flag: st.volatile / ld.volatile",
    "(a) flag: st.relaxed.sys / ld.relaxed.sys",
    "(b) st.release.sys / ld.acquire.sys",
    "(c) red.release.sys.add / ld.acquire.sys (signal/wait)",
    "(d) red.relaxed.sys.add / ld.relaxed.sys (rlxsignal/rlxwait)",
    "(e) red.relaxed.sys.add / ld.acquire.sys",
    "(f) red.release.sys.add / ld.relaxed.sys"};
#define NBLK 3
static const int k_blocks[NBLK] = {132, 264, 528};

typedef struct {
  int ran, failed;
  double pingpong_us;     /* one way, release signal / acquire wait */
  double pingpong_rlx_us; /* one way, relaxed signal / relaxed wait (rlxsignal/rlxwait) */
  double pp_us[NPP];      /* one way per variant, minimal spin loop */
  double put_gbs[NBLK];   /* rank 0 -> rank 1, SM copy through the memory channel */
  double ce_gbs;          /* cudaMemcpyAsync into the peer-mapped buffer */
  int cycles;
  double cycle_ms;
  long long gpu_free_delta; /* bytes of free GPU memory lost over the cycles (rank 0's device) */
  long long rss_delta_kib, fd_delta;
  char scratch_kind[16], sem_kind[16];
} results_t;

static results_t *g_res; /* shared with the forked ranks (MAP_SHARED) */
static int g_cycles = 10000, g_iters = 20000;
static size_t g_bytes = 1ull << 30;
static pcl_bootstrap_handle_t g_handle;

#include "gpu_test_check.h"
#include "gpu_test_pattern.cuh"

/* ---- test kernels ---- */

/* The memory-channel protocol of kernels/kernel_abi.h (pcl_kmemchan_t), restated here so that
 * this test checks the transport independently of the kernels' own primitives:
 * signal = release system-scope add on the peer's inbound counter; wait = ++expected, then
 * acquire-poll the local inbound counter; LL16 = one 16-byte volatile store {d0, flag, d1, flag}.
 */
typedef struct {
  uint32_t *err;
  uint64_t start;
  uint32_t n;
  int dead;
} watch_t;

static __device__ __forceinline__ uint64_t gtimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ void watch_init(watch_t *w, uint32_t *err) {
  w->err = err;
  w->start = 0;
  w->n = 0;
  w->dead = 0;
}

/* 20 s without progress: record an error and give up (a broken channel fails, never hangs). */
static __device__ __forceinline__ int watch_tick(watch_t *w) {
  if (w->dead)
    return 1;
  if ((++w->n & 1023u) != 0)
    return 0;
  uint64_t now = gtimer();
  if (w->start == 0)
    w->start = now;
  else if (now - w->start > 20ull * 1000 * 1000 * 1000) {
    atomicCAS(w->err, 0u, 1u);
    w->dead = 1;
  }
  return w->dead;
}

static __device__ __forceinline__ void sem_signal(uint64_t remote_inbound) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(remote_inbound), "l"(1ull)
               : "memory");
}

static __device__ __forceinline__ void sem_wait(uint64_t inbound, uint64_t expected_p, watch_t *w) {
  uint64_t *expected = (uint64_t *)expected_p;
  uint64_t e = *expected + 1, v;
  *expected = e;
  w->start = 0;
  do {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(inbound) : "memory");
  } while ((int64_t)(v - e) < 0 && !watch_tick(w));
}

/* Relaxed forms: no ordering of earlier data, only the token itself (plans' rlxsignal/rlxwait). */
static __device__ __forceinline__ void sem_signal_rlx(uint64_t remote_inbound) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(remote_inbound), "l"(1ull)
               : "memory");
}

static __device__ __forceinline__ void sem_wait_rlx(uint64_t inbound, uint64_t expected_p,
                                                    watch_t *w) {
  uint64_t *expected = (uint64_t *)expected_p;
  uint64_t e = *expected + 1, v;
  *expected = e;
  w->start = 0;
  do {
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(inbound) : "memory");
  } while ((int64_t)(v - e) < 0 && !watch_tick(w));
}

static __device__ __forceinline__ void ll16_store(void *p, uint2 v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(flag),
               "r"(v.y), "r"(flag)
               : "memory");
}

static __device__ __forceinline__ uint2 ll16_wait(const void *p, uint32_t flag, watch_t *w) {
  uint32_t d1, f1, d2, f2;
  w->start = 0;
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2)
                 : "l"(p)
                 : "memory");
  } while ((f1 != flag || f2 != flag) && !watch_tick(w));
  return make_uint2(d1, d2);
}

/* All threads of the grid copy 16-byte words, four loads in flight per thread. */
__global__ void put_kernel(uint4 *dst, const uint4 *src, size_t n16) {
  size_t nt = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * nt < n16; i += 4 * nt) {
    uint4 a = src[i], b = src[i + nt], c = src[i + 2 * nt], d = src[i + 3 * nt];
    dst[i] = a;
    dst[i + nt] = b;
    dst[i + 2 * nt] = c;
    dst[i + 3 * nt] = d;
  }
  for (; i < n16; i += nt)
    dst[i] = src[i];
}

__global__ void put_bytes_kernel(char *dst, const char *src, size_t n) {
  size_t nt = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nt)
    dst[i] = src[i];
}

/* Counts bytes of p[0, n) that differ from the fill pattern at byte offset src_off. */
__global__ void verify_kernel(const unsigned char *p, size_t n, size_t src_off, uint32_t seed,
                              unsigned long long *bad) {
  size_t nt = (size_t)gridDim.x * blockDim.x;
  unsigned long long mine = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nt) {
    mine += p[i] != pcl_test_pattern_byte(src_off + i, seed);
  }
  if (mine)
    atomicAdd(bad, mine);
}

__global__ void signal_kernel(uint64_t remote_inbound) {
  __threadfence_system();
  sem_signal(remote_inbound);
}

__global__ void wait_kernel(uint64_t inbound, uint64_t expected, uint32_t *err) {
  watch_t w;
  watch_init(&w, err);
  sem_wait(inbound, expected, &w);
}

/* One thread each side; rank 0 times iters round trips after a warm-up. */
__global__ void pingpong_kernel(pcl_memchan_info_t ch, int rank, int iters, int relaxed,
                                uint32_t *err, unsigned long long *ns) {
  watch_t w;
  watch_init(&w, err);
  uint64_t t0 = 0;
  for (int i = -1000; i < iters; i++) {
    if (i == 0)
      t0 = gtimer();
    if (relaxed) {
      if (rank == 0) {
        sem_signal_rlx(ch.remote_inbound);
        sem_wait_rlx(ch.local_inbound, ch.local_expected, &w);
      } else {
        sem_wait_rlx(ch.local_inbound, ch.local_expected, &w);
        sem_signal_rlx(ch.remote_inbound);
      }
    } else if (rank == 0) {
      sem_signal(ch.remote_inbound);
      sem_wait(ch.local_inbound, ch.local_expected, &w);
    } else {
      sem_wait(ch.local_inbound, ch.local_expected, &w);
      sem_signal(ch.remote_inbound);
    }
    if (w.dead)
      break;
  }
  *ns = gtimer() - t0;
}

/* ---- ping-pong variants: a spin loop of a load, a compare and a countdown; the timeout watch
 * is looked at once every PP_SPIN polls. Every variant leaves the counters where the memory
 * channel protocol expects them: after n signals the peer's inbound counter holds n (stores
 * write the sender's count, adds add 1), so the variants and signal/wait can follow each other
 * on one channel. ---- */
#define PP_SPIN 4096u

/* Called once every PP_SPIN polls: 1 (and the error recorded) after 20 s without progress. */
static __device__ __noinline__ int watch_slow(watch_t *w) {
  uint64_t now = gtimer();
  if (w->start == 0)
    w->start = now;
  else if (now - w->start > 20ull * 1000 * 1000 * 1000) {
    atomicCAS(w->err, 0u, 1u);
    w->dead = 1;
  }
  return w->dead;
}

/* `sig` and `poll` are literals at every call site, so the switches fold away. */
static __device__ __forceinline__ void pp_signal(int sig, uint64_t remote, uint64_t count) {
  switch (sig) {
  case SIG_ST_VOLATILE:
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(remote), "l"(count) : "memory");
    break;
  case SIG_ST_RELAXED:
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(remote), "l"(count) : "memory");
    break;
  case SIG_ST_RELEASE:
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(remote), "l"(count) : "memory");
    break;
  case SIG_RED_RELEASE:
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(remote), "l"(1ull) : "memory");
    break;
  default:
    asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(remote), "l"(1ull) : "memory");
    break;
  }
}

static __device__ __forceinline__ uint64_t pp_load(int poll, uint64_t p) {
  uint64_t v;
  switch (poll) {
  case POLL_VOLATILE:
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    break;
  case POLL_RELAXED:
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    break;
  default:
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    break;
  }
  return v;
}

/* Returns 0 when the watch gave up. */
static __device__ __forceinline__ int pp_wait(int poll, uint64_t p, uint64_t e, watch_t *w) {
  uint32_t spin = PP_SPIN;
  while ((int64_t)(pp_load(poll, p) - e) < 0) {
    if (--spin == 0) {
      spin = PP_SPIN;
      if (watch_slow(w))
        return 0;
    }
  }
  return 1;
}

/* One thread each side; `count` = signals each side already sent on this channel (the same on
 * both, and what each side already received). Rank 0 times iters round trips after a warm-up. */
static __device__ __forceinline__ void pp_body(int sig, int poll, uint64_t remote, uint64_t local,
                                               uint64_t count, int rank, int iters, watch_t *w,
                                               unsigned long long *ns) {
  uint64_t t0 = 0;
  for (int i = -1000; i < iters; i++) {
    if (i == 0)
      t0 = gtimer();
    count++;
    if (rank == 0)
      pp_signal(sig, remote, count);
    w->start = 0;
    if (!pp_wait(poll, local, count, w))
      break;
    if (rank != 0)
      pp_signal(sig, remote, count);
  }
  *ns = gtimer() - t0;
}

__global__ void pingpong_variant_kernel(int variant, pcl_memchan_info_t ch, uint64_t count,
                                        int rank, int iters, uint32_t *err,
                                        unsigned long long *ns) {
  watch_t w;
  watch_init(&w, err);
  const uint64_t ro = ch.remote_inbound, li = ch.local_inbound;
  switch (variant) {
  case PP_VOLATILE:
    pp_body(SIG_ST_VOLATILE, POLL_VOLATILE, ro, li, count, rank, iters, &w, ns);
    break;
  case PP_RELAXED_ST:
    pp_body(SIG_ST_RELAXED, POLL_RELAXED, ro, li, count, rank, iters, &w, ns);
    break;
  case PP_RELEASE_ST:
    pp_body(SIG_ST_RELEASE, POLL_ACQUIRE, ro, li, count, rank, iters, &w, ns);
    break;
  case PP_RELEASE_RED:
    pp_body(SIG_RED_RELEASE, POLL_ACQUIRE, ro, li, count, rank, iters, &w, ns);
    break;
  case PP_RELAXED_RED:
    pp_body(SIG_RED_RELAXED, POLL_RELAXED, ro, li, count, rank, iters, &w, ns);
    break;
  case PP_RLXRED_ACQ:
    pp_body(SIG_RED_RELAXED, POLL_ACQUIRE, ro, li, count, rank, iters, &w, ns);
    break;
  default:
    pp_body(SIG_RED_RELEASE, POLL_RELAXED, ro, li, count, rank, iters, &w, ns);
    break;
  }
  /* Keep the channel's expected count in step with what was received (signal/wait use it). */
  if (!w.dead)
    *(uint64_t *)ch.local_expected = count + 1000 + (uint64_t)iters;
}

/* LL16: 8 payload bytes per 16-byte packet into the peer's scratch, read back by the peer. */
__global__ void put_ll16_kernel(char *remote_pkts, const uint2 *src, size_t npkt, uint32_t flag) {
  size_t nt = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < npkt; i += nt)
    ll16_store(remote_pkts + 16 * i, src[i], flag);
}

__global__ void read_ll16_kernel(const char *pkts, uint2 *dst, size_t npkt, uint32_t flag,
                                 uint32_t *err) {
  watch_t w;
  watch_init(&w, err);
  size_t nt = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < npkt; i += nt)
    dst[i] = ll16_wait(pkts + 16 * i, flag, &w);
}

/* ---- host helpers ---- */

static long long rss_kib(void) {
  long long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL)
    return 0;
  if (fscanf(f, "%lld %lld", &pages, &rss) != 2)
    rss = 0;
  fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static long long nfds(void) {
  long long n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL)
    return 0;
  while (readdir(d) != NULL)
    n++;
  closedir(d);
  return n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Each rank puts a pattern into the other's scratch at an odd offset and length, signals, waits
 * for the peer's signal and checks its own scratch; then the same with LL16 packets. */
static int check_data(int rank, pcl_bootstrap_t *b, pcl_memchan_t *mc, void *scratch,
                      cudaStream_t s) {
  int peer = 1 - rank;
  pcl_memchan_info_t ch;
  CK(pcl_memchan_info(mc, peer, 1, &ch));
  const size_t n = (64u << 20) + 13, off = 4099;
  uint32_t *src = NULL, *err = NULL;
  unsigned long long *bad = NULL, hbad = 0;
  CUCK(cudaMalloc(&src, n + 64));
  CUCK(cudaMalloc(&bad, sizeof(*bad)));
  CUCK(cudaMalloc(&err, sizeof(*err)));
  CUCK(cudaMemsetAsync(bad, 0, sizeof(*bad), s));
  CUCK(cudaMemsetAsync(err, 0, sizeof(*err), s));
  pcl_test_fill_kernel<<<264, 512, 0, s>>>(src, (n + 64) / 4, 77u + rank);
  /* The 16-byte path for the aligned bulk, bytes for the ragged head and tail (as a plan's put
   * does). The source starts at the same offset modulo 16 as the destination. */
  const size_t shift = off % 16, head = 16 - shift, bulk = (n - head) / 16 * 16;
  const char *from = (const char *)src + shift;
  char *to = (char *)ch.remote_scratch + off;
  put_bytes_kernel<<<1, 256, 0, s>>>(to, from, head);
  put_kernel<<<264, 512, 0, s>>>((uint4 *)(to + head), (const uint4 *)(from + head), bulk / 16);
  put_bytes_kernel<<<1, 256, 0, s>>>(to + head + bulk, from + head + bulk, n - head - bulk);
  signal_kernel<<<1, 1, 0, s>>>(ch.remote_inbound);
  wait_kernel<<<1, 1, 0, s>>>(ch.local_inbound, ch.local_expected, err);
  verify_kernel<<<264, 512, 0, s>>>((const unsigned char *)scratch + off, n, shift, 77u + peer,
                                    bad);
  CUCK(cudaMemcpyAsync(&hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost, s));
  uint32_t herr = 0;
  CUCK(cudaMemcpyAsync(&herr, err, sizeof(herr), cudaMemcpyDeviceToHost, s));
  CUCK(cudaStreamSynchronize(s));
  if (herr != 0)
    FAIL("wait gave up with error %u", herr);
  if (hbad != 0)
    FAIL("put: %llu of %zu bytes wrong", hbad, n);

  /* LL16 packets: 1 MiB payload, two calls with flags 1 and 2 into the same slots. */
  const size_t npkt = (1u << 20) / 8;
  uint2 *out = NULL;
  CUCK(cudaMalloc(&out, npkt * 8));
  CK(pcl_bootstrap_barrier(b));
  for (uint32_t flag = 1; flag <= 2; flag++) {
    pcl_test_fill_kernel<<<132, 512, 0, s>>>(src, npkt * 2, 1000u * flag + rank);
    put_ll16_kernel<<<132, 512, 0, s>>>((char *)ch.remote_scratch, (const uint2 *)src, npkt, flag);
    read_ll16_kernel<<<132, 512, 0, s>>>((const char *)scratch, out, npkt, flag, err);
    CUCK(cudaMemsetAsync(bad, 0, sizeof(*bad), s));
    verify_kernel<<<132, 512, 0, s>>>((const unsigned char *)out, npkt * 8, 0, 1000u * flag + peer,
                                      bad);
    CUCK(cudaMemcpyAsync(&hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost, s));
    CUCK(cudaMemcpyAsync(&herr, err, sizeof(herr), cudaMemcpyDeviceToHost, s));
    CUCK(cudaStreamSynchronize(s));
    if (herr != 0 || hbad != 0)
      FAIL("LL16 flag %u: error %u, %llu bytes wrong", flag, herr, hbad);
    /* Nobody may overwrite the slots with the next flag before both sides read this one. */
    CK(pcl_bootstrap_barrier(b));
  }
  cudaFree(out);
  cudaFree(src);
  cudaFree(bad);
  cudaFree(err);
  return 0;
}

/* A buffer made of three cuMem allocations mapped back to back (as PyTorch's expandable segments
 * make them), registered from the middle of the first to the middle of the last: the peer writes
 * all of it through its mapping and this rank checks it. */
static int check_multichunk(int rank, pcl_bootstrap_t *b, pcl_memchan_t *mc, cudaStream_t s) {
  const pcl_cu_fns_t *cu = NULL;
  CK(pcl_cu_load(&cu));
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = rank;
  size_t gran = 0;
  if (cu->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
    FAIL("granularity");
  const int nseg = 3;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h[nseg];
  if (cu->mem_address_reserve(&va, nseg * gran, gran, 0, 0))
    FAIL("reserve");
  for (int i = 0; i < nseg; i++)
    if (cu->mem_create(&h[i], gran, &prop, 0) || cu->mem_map(va + i * gran, gran, 0, h[i], 0))
      FAIL("create/map segment %d", i);
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cu->mem_set_access(va, nseg * gran, &acc, 1))
    FAIL("set access");
  char *mine = (char *)(uintptr_t)va + gran / 2;
  const size_t bytes = 2 * gran;
  uint32_t *src = NULL;
  unsigned long long *bad = NULL, hbad = 0;
  CUCK(cudaMalloc(&src, bytes));
  CUCK(cudaMalloc(&bad, sizeof(*bad)));
  CUCK(cudaMemsetAsync(bad, 0, sizeof(*bad), s));
  pcl_test_fill_kernel<<<132, 512, 0, s>>>(src, bytes / 4, 500u + rank);
  CUCK(cudaStreamSynchronize(s));

  pcl_memchan_buf_t *buf = NULL;
  CK(pcl_memchan_buf_reg(mc, mine, bytes, &buf));
  uint64_t rbytes = 0, remote = pcl_memchan_buf_remote(buf, 1 - rank, &rbytes);
  if (remote == 0 || rbytes != bytes)
    FAIL("peer buffer %llx of %llu bytes", (unsigned long long)remote, (unsigned long long)rbytes);
  put_kernel<<<132, 512, 0, s>>>((uint4 *)remote, (const uint4 *)src, bytes / 16);
  CUCK(cudaStreamSynchronize(s));
  CK(pcl_bootstrap_barrier(b)); /* the peer's writes into my buffer are complete */
  verify_kernel<<<132, 512, 0, s>>>((const unsigned char *)mine, bytes, 0, 500u + (1 - rank), bad);
  CUCK(cudaMemcpyAsync(&hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost, s));
  CUCK(cudaStreamSynchronize(s));
  if (hbad != 0)
    FAIL("multi-segment buffer: %llu of %zu bytes wrong", hbad, bytes);
  CK(pcl_bootstrap_barrier(b)); /* the peer is done with my buffer before it goes away */
  pcl_memchan_buf_release(buf);
  for (int i = 0; i < nseg; i++) {
    cu->mem_unmap(va + i * gran, gran);
    cu->mem_release(h[i]);
  }
  cu->mem_address_free(va, nseg * gran);
  cudaFree(src);
  cudaFree(bad);
  return 0;
}

static int measure(int rank, int mode, pcl_bootstrap_t *b, pcl_memchan_t *mc, cudaStream_t s) {
  int peer = 1 - rank;
  results_t *r = &g_res[mode];
  pcl_memchan_info_t ch;
  CK(pcl_memchan_info(mc, peer, 0, &ch));
  uint32_t *err = NULL, herr = 0;
  unsigned long long *ns = NULL, hns = 0;
  CUCK(cudaMalloc(&err, sizeof(*err)));
  CUCK(cudaMalloc(&ns, sizeof(*ns)));
  CUCK(cudaMemsetAsync(err, 0, sizeof(*err), s));
  for (int relaxed = 0; relaxed < 2; relaxed++) {
    CK(pcl_bootstrap_barrier(b));
    pingpong_kernel<<<1, 1, 0, s>>>(ch, rank, g_iters, relaxed, err, ns);
    CUCK(cudaMemcpyAsync(&hns, ns, sizeof(hns), cudaMemcpyDeviceToHost, s));
    CUCK(cudaMemcpyAsync(&herr, err, sizeof(herr), cudaMemcpyDeviceToHost, s));
    CUCK(cudaStreamSynchronize(s));
    if (herr != 0)
      FAIL("ping-pong gave up with error %u", herr);
    if (rank == 0)
      *(relaxed ? &r->pingpong_rlx_us : &r->pingpong_us) = hns / 1e3 / (2.0 * g_iters);
  }
  /* Each run above sent 1000 + g_iters signals from each side on channel 0. */
  uint64_t count = 2 * (1000 + (uint64_t)g_iters);
  for (int v = 0; v < NPP; v++) {
    CK(pcl_bootstrap_barrier(b));
    pingpong_variant_kernel<<<1, 1, 0, s>>>(v, ch, count, rank, g_iters, err, ns);
    CUCK(cudaMemcpyAsync(&hns, ns, sizeof(hns), cudaMemcpyDeviceToHost, s));
    CUCK(cudaMemcpyAsync(&herr, err, sizeof(herr), cudaMemcpyDeviceToHost, s));
    CUCK(cudaStreamSynchronize(s));
    if (herr != 0)
      FAIL("ping-pong variant %s gave up with error %u", k_pp_name[v], herr);
    count += 1000 + (uint64_t)g_iters;
    if (rank == 0)
      r->pp_us[v] = hns / 1e3 / (2.0 * g_iters);
  }

  /* Bandwidth: rank 0 writes g_bytes into rank 1's scratch; rank 1 only waits at barriers. */
  void *src = NULL;
  cudaEvent_t e0, e1;
  CUCK(cudaEventCreate(&e0));
  CUCK(cudaEventCreate(&e1));
  if (rank == 0) {
    CUCK(cudaMalloc(&src, g_bytes));
    pcl_test_fill_kernel<<<264, 512, 0, s>>>((uint32_t *)src, g_bytes / 4, 5);
  }
  for (int k = 0; k < NBLK + 1; k++) {
    CK(pcl_bootstrap_barrier(b));
    if (rank == 0) {
      float best = 1e30f;
      for (int rep = 0; rep < 4; rep++) { /* rep 0 warms up */
        CUCK(cudaEventRecord(e0, s));
        if (k < NBLK)
          put_kernel<<<k_blocks[k], 512, 0, s>>>((uint4 *)ch.remote_scratch, (const uint4 *)src,
                                                 g_bytes / 16);
        else
          CUCK(cudaMemcpyAsync((void *)ch.remote_scratch, src, g_bytes, cudaMemcpyDefault, s));
        CUCK(cudaEventRecord(e1, s));
        CUCK(cudaEventSynchronize(e1));
        float ms = 0;
        CUCK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0 && ms < best)
          best = ms;
      }
      double gbs = g_bytes / (best * 1e-3) / 1e9;
      if (k < NBLK)
        r->put_gbs[k] = gbs;
      else
        r->ce_gbs = gbs;
    }
    CK(pcl_bootstrap_barrier(b));
  }
  if (src)
    cudaFree(src);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(err);
  cudaFree(ns);
  return 0;
}

/* Create/destroy cycles: registration + import + semaphores each time; memory must stay flat. */
static int cycles(int rank, int mode, pcl_bootstrap_t *b, pcl_mem_alloc_kind_t scratch_kind,
                  pcl_mem_alloc_kind_t sem_kind) {
  results_t *r = &g_res[mode];
  pcl_mem_alloc_t *scratch = NULL;
  CK(pcl_mem_alloc(rank, 4u << 20, scratch_kind, &scratch));
  pcl_memchan_config_t cfg = {rank, 4, NULL, scratch->ptr, scratch->bytes, sem_kind};
  size_t free0 = 0, free1 = 0, total = 0;
  long long rss0 = 0, fd0 = 0;
  int warm = 20;
  double t0 = 0;
  for (int i = 0; i < g_cycles + warm; i++) {
    if (i == warm) {
      CK(pcl_bootstrap_barrier(b));
      CUCK(cudaMemGetInfo(&free0, &total));
      rss0 = rss_kib();
      fd0 = nfds();
      t0 = now_s();
    }
    pcl_memchan_t *mc = NULL;
    CK(pcl_memchan_create(b, &cfg, &mc));
    pcl_memchan_destroy(mc);
  }
  double dt = now_s() - t0;
  CK(pcl_bootstrap_barrier(b)); /* both threads done before the process-wide counts */
  CUCK(cudaMemGetInfo(&free1, &total));
  pcl_mem_free(scratch);
  if (rank == 0) {
    r->cycles = g_cycles;
    r->cycle_ms = g_cycles ? dt * 1e3 / g_cycles : 0;
    r->gpu_free_delta = (long long)free0 - (long long)free1;
    r->rss_delta_kib = rss_kib() - rss0;
    r->fd_delta = nfds() - fd0;
    if (r->gpu_free_delta > (4ll << 20) || r->fd_delta > 4 || r->rss_delta_kib > 16 * 1024)
      FAIL("resources grew over %d cycles: gpu %lld bytes, rss %lld KiB, fds %lld", g_cycles,
           r->gpu_free_delta, r->rss_delta_kib, r->fd_delta);
  }
  return 0;
}

/* One rank exposes host memory as scratch: registration fails there, and every rank must get
 * an error from the same collective call (nobody hangs, nobody believes it succeeded). */
static int check_error_agreement(int rank, pcl_bootstrap_t *b) {
  static char host_scratch[4096];
  pcl_memchan_config_t cfg = {rank, 1, NULL, NULL, 0, PCL_MEM_ALLOC_AUTO};
  if (rank == 1) {
    cfg.scratch = host_scratch;
    cfg.scratch_bytes = sizeof(host_scratch);
  }
  pcl_memchan_t *mc = NULL;
  if (pcl_memchan_create(b, &cfg, &mc) == ncclSuccess || mc != NULL)
    FAIL("memchan with a bad scratch on rank 1 succeeded");
  CK(pcl_bootstrap_barrier(b));
  return 0;
}

static int rank_main(int rank, int mode) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2)
    return 77;
  CUCK(cudaSetDevice(rank));
  pcl_bootstrap_t *b = NULL;
  CK(pcl_bootstrap_create(&g_handle, rank, 2, NULL, &b));
  /* Processes: cuMem scratch (fd path) + cudaMalloc counters (legacy IPC); threads: the other
   * way round (direct pointers with peer access and with cuMemSetAccess). */
  pcl_mem_alloc_kind_t scratch_kind = mode == 0 ? PCL_MEM_ALLOC_AUTO : PCL_MEM_ALLOC_CUDA;
  pcl_mem_alloc_kind_t sem_kind = mode == 0 ? PCL_MEM_ALLOC_CUDA : PCL_MEM_ALLOC_AUTO;
  pcl_mem_alloc_t *scratch = NULL;
  CK(pcl_mem_alloc(rank, g_bytes + 4096 + (64u << 20), scratch_kind, &scratch));
  pcl_memchan_config_t cfg = {rank, 2, NULL, scratch->ptr, scratch->bytes, sem_kind};
  pcl_memchan_t *mc = NULL;
  CK(pcl_memchan_create(b, &cfg, &mc));
  if (rank == 0) {
    snprintf(g_res[mode].scratch_kind, sizeof(g_res[mode].scratch_kind), "%s",
             scratch->kind == PCL_MEM_ALLOC_CUMEM ? "cumem" : "cudaMalloc");
    snprintf(g_res[mode].sem_kind, sizeof(g_res[mode].sem_kind), "%s",
             sem_kind == PCL_MEM_ALLOC_CUDA ? "cudaMalloc" : "auto");
  }
  cudaStream_t s;
  CUCK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int rc = check_data(rank, b, mc, scratch->ptr, s);
  if (rc == 0)
    rc = check_multichunk(rank, b, mc, s);
  if (rc == 0)
    rc = measure(rank, mode, b, mc, s);
  cudaStreamDestroy(s);
  pcl_memchan_destroy(mc);
  if (rc == 0)
    rc = check_error_agreement(rank, b);
  if (rc == 0)
    rc = cycles(rank, mode, b, scratch_kind, sem_kind);
  pcl_mem_free(scratch);
  pcl_bootstrap_destroy(b);
  return rc;
}

typedef struct {
  int rank, rc;
} thread_arg_t;

static void *thread_main(void *p) {
  thread_arg_t *a = (thread_arg_t *)p;
  a->rc = rank_main(a->rank, 1);
  return NULL;
}

static int run_mode(int mode) {
  int rc = 0;
  if (pcl_bootstrap_root_create(&g_handle) != ncclSuccess)
    return 1;
  g_res[mode].ran = 1;
  if (mode == 0) {
    pid_t pid[2];
    fflush(stdout);
    for (int r = 0; r < 2; r++)
      if ((pid[r] = fork()) == 0)
        _exit(rank_main(r, 0));
    for (int r = 0; r < 2; r++) {
      int st = 0;
      waitpid(pid[r], &st, 0);
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code != 0 && rc == 0)
        rc = code;
    }
  } else {
    pthread_t th[2];
    thread_arg_t a[2] = {{0, 0}, {1, 0}};
    for (int r = 0; r < 2; r++)
      pthread_create(&th[r], NULL, thread_main, &a[r]);
    for (int r = 0; r < 2; r++) {
      pthread_join(th[r], NULL);
      if (a[r].rc != 0 && rc == 0)
        rc = a[r].rc;
    }
  }
  g_res[mode].failed = rc != 0 && rc != 77;
  return rc;
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
      g_cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      g_iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      g_bytes = (size_t)atoll(argv[++i]) << 20;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--cycles N] [--iters N] [--mib N] [--only proc|thread]\n",
              argv[0]);
      return 2;
    }
  }
  if (getenv("PLANCCL_SOCKET_IFNAME") == NULL)
    setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  /* A failed rank leaves its peer in a bootstrap step: let that give up within a minute. */
  if (getenv("PLANCCL_BOOTSTRAP_TIMEOUT_S") == NULL)
    setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "60", 1);
  g_res = (results_t *)mmap(NULL, sizeof(results_t) * NMODES, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_res == MAP_FAILED)
    return 1;
  memset(g_res, 0, sizeof(results_t) * NMODES);
  int rc = 0;
  /* Processes first: they must fork before this process makes any CUDA call. */
  if (only == NULL || !strcmp(only, "proc"))
    rc = run_mode(0);
  if (rc == 77) {
    printf("transport_memchan: needs 2 GPUs, skipping\n");
    return 77;
  }
  if (only == NULL || !strcmp(only, "thread")) {
    int rt = run_mode(1);
    if (rt == 77) {
      printf("transport_memchan: needs 2 GPUs, skipping\n");
      return 77;
    }
    if (rc == 0)
      rc = rt;
  }
  const char *name[NMODES] = {"processes", "threads"};
  printf("\nmemory channels, 2 GPUs (%zu MiB transfers, %d ping-pong iterations)\n", g_bytes >> 20,
         g_iters);
  printf("%-10s %-9s %-22s %9s %9s %9s %9s %9s %9s %8s %9s %9s %6s\n", "mode", "status",
         "scratch/sems", "1-way us", "rlx us", "put 132", "put 264", "put 528", "CE GB/s", "cycles",
         "ms/cycle", "gpu dB", "fd d");
  for (int m = 0; m < NMODES; m++) {
    results_t *r = &g_res[m];
    if (!r->ran)
      continue;
    char kinds[40];
    snprintf(kinds, sizeof(kinds), "%s/%s", r->scratch_kind, r->sem_kind);
    printf("%-10s %-9s %-22s %9.2f %9.2f %9.1f %9.1f %9.1f %9.1f %8d %9.3f %9lld %6lld\n", name[m],
           r->failed ? "FAILED" : "ok", kinds, r->pingpong_us, r->pingpong_rlx_us, r->put_gbs[0],
           r->put_gbs[1], r->put_gbs[2], r->ce_gbs, r->cycles, r->cycle_ms, r->gpu_free_delta,
           r->fd_delta);
  }
  printf("\nping-pong one way (us) = round trip / 2, one thread per GPU, %d iterations, spin loop\n"
         "checking the timeout every %u polls:\n",
         g_iters, PP_SPIN);
  printf("  %-62s %10s %10s\n", "variant (signal / poll)", "processes", "threads");
  for (int v = 0; v < NPP; v++)
    printf("  %-62s %10.3f %10.3f\n", k_pp_name[v], g_res[0].ran ? g_res[0].pp_us[v] : 0.0,
           g_res[1].ran ? g_res[1].pp_us[v] : 0.0);
  printf("  %-62s %10.3f %10.3f\n", "memchan signal/wait as the table above measures it",
         g_res[0].pingpong_us, g_res[1].pingpong_us);
  printf("  %-62s %10.3f %10.3f\n", "memchan rlxsignal/rlxwait as the table above measures it",
         g_res[0].pingpong_rlx_us, g_res[1].pingpong_rlx_us);
  printf("baseline (BASELINE.md): 0.70 us one way, ~370 GB/s SM put, ~390 GB/s copy engine\n");
  printf("CE GB/s = cudaMemcpyAsync into the peer-mapped buffer (not the proxy's CE path)\n");
  printf("rss delta over the cycles: processes %lld KiB, threads %lld KiB\n",
         g_res[0].rss_delta_kib, g_res[1].rss_delta_kib);
  return rc;
}
