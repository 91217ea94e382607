/* SPDX-License-Identifier: MIT
 * Port channels driven by a kernel through the real proxy: two ranks as two forked processes, on
 * GPUs 0 and 1, over the copy engine (peer buffers imported over CUDA IPC) and over TCP (the ranks
 * given different PLANCCL_HOST_IDs, so the topology sees two hosts). Per case: messages of 4 KiB
 * .. 256 MiB in several chunks then a flag + flush, every byte checked by the receiver, bandwidth;
 * then an 8-byte put+signal ping-pong (one way = round trip / 2), payload checked each time.
 * Exits 77 with fewer than 2 GPUs.
 * Usage: transport_port [--only ce|tcp] [--max-mib N] [--chunks N] [--iters N] */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h> /* before the C block: nccl.h pulls in C++ headers of its own */
#include "gpu_test_check.h"
#include "gpu_test_pattern.cuh"
extern "C" { /* param.h has no C++ guard of its own */
#include "param.h"
}
#include "mem.h"
#include "proxy.h"
#include "topo.h"
#include "packet.cuh" /* kernels/: the system-scope loads the executor polls with */

/* ---- configuration and results (shared with the forked ranks) ---- */

enum { CASE_CE, CASE_TCP, NCASES };
static const char *const k_case_name[NCASES] = {"ce", "tcp"};
static const pcl_transport_kind_t k_case_kind[NCASES] = {PCL_TRANSPORT_CE, PCL_TRANSPORT_TCP};

#define NSIZES 9    /* 4 KiB x 4^k, k = 0..8: 4 KiB .. 256 MiB */
#define GUARD 4096u /* bytes after each message that must stay untouched */

/* Memory ids, the same on both ranks; channel 0 carries everything. */
#define MEM_SRC 0u
#define MEM_DST 1u
#define MEM_SEM 2u
#define CHAN 0u

typedef struct {
  int ran, failed;
  char chosen[8];        /* what pcl_transport_choose said */
  char note[96];         /* e.g. why the chosen transport was overridden */
  int attempted[NSIZES]; /* 1: the sender started this size */
  int tested[NSIZES];    /* 1: the receiver checked this size */
  int pass[NSIZES];      /* receiver: every byte right, nothing past the end written */
  int reps[NSIZES];
  double us_msg[NSIZES]; /* sender: time per message (all chunks, flag, flush) */
  double gbs[NSIZES];
  int lat_ran, lat_pass, lat_iters;
  double lat_us; /* one way */
} case_res_t;

static case_res_t *g_res;
static pcl_bootstrap_handle_t g_handle;
static size_t g_max_bytes = 256u << 20;
static int g_chunks = 4, g_iters = 0, g_timeout_s = 60;

/* Pinned, device-mapped: the host raises `abort` (the proxy and the kernels stop), kernels
 * record why they gave up in `err`. */
typedef struct {
  volatile uint32_t abort;
  volatile uint32_t err;
  volatile uint32_t detail;
} ctl_t;

enum { ERR_NONE, ERR_SEM_TIMEOUT, ERR_FLUSH_TIMEOUT, ERR_ABORTED, ERR_PAYLOAD };
static const char *const k_err_name[] = {"none", "semaphore wait timed out",
                                         "flush (FIFO tail) wait timed out", "aborted",
                                         "wrong payload"};

/* ---- device side ---- */

static __device__ __forceinline__ uint64_t gtimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ void set_err(ctl_t *c, uint32_t err, uint32_t detail) {
  if (c->err == ERR_NONE) {
    c->detail = detail;
    c->err = err;
  }
}

/* Looked at once every 1024 polls: 1 when the wait must give up (timeout or abort). */
static __device__ __noinline__ int spin_slow(uint64_t *start, ctl_t *c, uint64_t timeout_ns,
                                             uint32_t err, uint32_t detail) {
  uint64_t now = gtimer();
  if (c->abort != 0) {
    set_err(c, ERR_ABORTED, detail);
    return 1;
  }
  if (*start == 0)
    *start = now;
  else if (now - *start > timeout_ns) {
    set_err(c, err, detail);
    return 1;
  }
  return 0;
}

/* Waits until *p >= target (acquire); 0 when it gave up. */
static __device__ int wait_ge(const uint64_t *p, uint64_t target, ctl_t *c, uint64_t timeout_ns,
                              uint32_t err, uint32_t detail) {
  uint32_t spin = 1024;
  uint64_t start = 0;
  while ((int64_t)(pcl_kload_acquire_sys((const uint64_t *)(p)) - target) < 0) {
    if (--spin == 0) {
      spin = 1024;
      if (spin_slow(&start, c, timeout_ns, err, detail))
        return 0;
    }
  }
  return 1;
}

/* Flush: the proxy pops a SYNC trigger only once every earlier transfer completed. */
static __device__ int wait_consumed(const pcl_fifo_device_t *f, uint64_t pos, ctl_t *c,
                                    uint64_t timeout_ns, uint32_t detail) {
  return wait_ge((const uint64_t *)f->tail, pos + 1, c, timeout_ns, ERR_FLUSH_TIMEOUT, detail);
}

static __device__ uint64_t push(const pcl_fifo_device_t *f, uint32_t type, uint32_t bytes,
                                uint32_t src_off, uint32_t dst_off, ctl_t *c, uint32_t detail) {
  uint64_t pos = pcl_fifo_push(*f, pcl_fifo_w0(bytes, src_off),
                               pcl_fifo_w1(type, MEM_SRC, MEM_DST, dst_off, CHAN), &c->abort);
  if (pos == UINT64_MAX)
    set_err(c, ERR_ABORTED, detail);
  return pos;
}

/* One thread: reps + 1 messages (the first warms up) of `bytes` from src to the peer's dst, each
 * in nchunks data triggers, the last one also carrying the flag and the flush; waits for each
 * flush. *ns = time of the reps after the warm-up. */
__global__ void send_kernel(pcl_fifo_device_t f, uint32_t bytes, uint32_t nchunks, int reps,
                            ctl_t *c, uint64_t timeout_ns, unsigned long long *ns) {
  uint32_t chunk = bytes / nchunks / 16 * 16;
  uint64_t t0 = gtimer();
  for (int r = -1; r < reps; r++) {
    if (r == 0)
      t0 = gtimer();
    uint64_t pos = 0;
    for (uint32_t k = 0; k < nchunks; k++) {
      uint32_t off = k * chunk, n = k + 1 < nchunks ? chunk : bytes - off;
      uint32_t type = PCL_FIFO_TYPE_DATA;
      if (k + 1 == nchunks)
        type |= PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC;
      pos = push(&f, type, n, off, off, c, 100 + k);
      if (pos == UINT64_MAX)
        return;
    }
    if (!wait_consumed(&f, pos, c, timeout_ns, 200 + (uint32_t)(r + 1)))
      return;
  }
  *ns = gtimer() - t0;
}

/* Receiver: waits for the flag count to reach target. */
__global__ void wait_kernel(const uint64_t *sem, uint64_t target, ctl_t *c, uint64_t timeout_ns) {
  wait_ge(sem, target, c, timeout_ns, ERR_SEM_TIMEOUT, 300);
}

/* 8-byte put + signal ping-pong, one thread each side. `received` = flags this rank already got
 * on its semaphore. Each message carries its token; the receiver checks it after the flag. Ends
 * with a flush so nothing is in flight when the kernel returns. */
__global__ void pingpong_kernel(pcl_fifo_device_t f, int rank, int warm, int iters, uint64_t *src,
                                const uint64_t *dst, const uint64_t *sem, uint64_t received,
                                ctl_t *c, uint64_t timeout_ns, unsigned long long *ns) {
  const uint32_t type = PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_FLAG;
  uint64_t t0 = gtimer();
  for (int i = -warm; i < iters; i++) {
    if (i == 0)
      t0 = gtimer();
    uint64_t token = 0x5eed000000000000ull + (uint64_t)(i + warm);
    if (rank == 0) {
      /* The push's release store orders this write before the trigger the proxy reads. */
      asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(src), "l"(token) : "memory");
      if (push(&f, type, 8, 0, 0, c, 400) == UINT64_MAX)
        return;
    }
    if (!wait_ge(sem, ++received, c, timeout_ns, ERR_SEM_TIMEOUT, 500))
      return;
    if (pcl_kload_relaxed_sys((const uint64_t *)(dst)) != token) {
      set_err(c, ERR_PAYLOAD, (uint32_t)(i + warm));
      return;
    }
    if (rank != 0) {
      asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(src), "l"(token) : "memory");
      if (push(&f, type, 8, 0, 0, c, 401) == UINT64_MAX)
        return;
    }
  }
  *ns = gtimer() - t0;
  uint64_t pos = push(&f, PCL_FIFO_TYPE_SYNC, 0, 0, 0, c, 402);
  if (pos != UINT64_MAX)
    wait_consumed(&f, pos, c, timeout_ns, 403);
}

/* Counts bytes of p[0, n) that differ from pcl_test_fill_kernel's pattern, and nonzero bytes of
 * p[n, n + guard). */
__global__ void verify_kernel(const unsigned char *p, size_t n, size_t guard, uint32_t seed,
                              unsigned long long *bad) {
  size_t nt = (size_t)gridDim.x * blockDim.x;
  unsigned long long mine = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n + guard; i += nt) {
    mine += p[i] != (i < n ? pcl_test_pattern_byte(i, seed) : 0);
  }
  if (mine)
    atomicAdd(bad, mine);
}

/* ---- host side of a rank ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t size_of(int k) {
  return (size_t)4096 << (2 * k);
}

static void fmt_size(char *out, size_t n, size_t bytes) {
  if (bytes >= (1u << 20))
    snprintf(out, n, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024)
    snprintf(out, n, "%zu KiB", bytes >> 10);
  else
    snprintf(out, n, "%zu B", bytes);
}

/* Waits for the stream while watching the proxy and the clock: on a proxy error or after the
 * timeout it raises the abort flag (kernels and proxy stop), then reports the kernel's error. */
static int finish(int rank, cudaStream_t s, pcl_proxy_t *px, ctl_t *c, const char *what) {
  double end = now_s() + g_timeout_s + 10, hard = end + 20;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess)
      break;
    if (e != cudaErrorNotReady)
      FAIL("%s: %s", what, cudaGetErrorString(e));
    if (c->abort == 0 && (pcl_proxy_error(px) != ncclSuccess || now_s() > end)) {
      fprintf(stderr, "rank %d: %s: %s, aborting\n", rank, what,
              pcl_proxy_error(px) != ncclSuccess ? "the proxy failed" : "timed out");
      c->abort = 1;
    }
    if (now_s() > hard)
      FAIL("%s: the kernel did not stop after the abort", what);
    usleep(20);
  }
  if (pcl_proxy_error(px) != ncclSuccess)
    FAIL("%s: proxy error %d", what, (int)pcl_proxy_error(px));
  if (c->err != ERR_NONE || c->abort != 0)
    FAIL("%s: %s (at %u)", what, c->err < 5 ? k_err_name[c->err] : "?", c->detail);
  return 0;
}

/* Rank 0 sends every size to rank 1, which checks every byte and the guard after the message. */
static int bandwidth(int rank, int cs, pcl_bootstrap_t *b, pcl_proxy_t *px, ctl_t *c, ctl_t *dc,
                     void *src, void *dst, uint64_t *sem, uint64_t *received, cudaStream_t s) {
  case_res_t *r = &g_res[cs];
  pcl_fifo_device_t f = pcl_proxy_fifo(px);
  const uint64_t tns = (uint64_t)g_timeout_s * 1000000000ull;
  unsigned long long *dbuf = NULL, hns = 0, hbad = 0;
  CUCK(cudaMalloc(&dbuf, 2 * sizeof(*dbuf)));
  int rc = 0;
  for (int k = 0; k < NSIZES && rc == 0; k++) {
    size_t bytes = size_of(k);
    if (bytes > g_max_bytes)
      break;
    /* Copy engine: ~2 GB per size; TCP (a few GB/s over loopback): ~0.5 GB. */
    size_t target = cs == CASE_CE ? (2ull << 30) : (512ull << 20);
    int reps = (int)(target / bytes);
    reps = reps < 2 ? 2 : reps > 200 ? 200 : reps;
    uint32_t nchunks = (uint32_t)g_chunks;
    while (nchunks > 1 && bytes / nchunks < 4096)
      nchunks /= 2;
    uint32_t seed = 0x1000u * (uint32_t)(k + 1) + 17u * (uint32_t)cs;
    if (rank == 0)
      pcl_test_fill_kernel<<<264, 512, 0, s>>>((uint32_t *)src, bytes / 4, seed);
    else
      CUCK(cudaMemsetAsync(dst, 0, bytes + GUARD, s));
    CUCK(cudaStreamSynchronize(s));
    CK(pcl_bootstrap_barrier(b));
    char what[64];
    snprintf(what, sizeof(what), "%s: %zu bytes", k_case_name[cs], bytes);
    if (rank == 0) {
      r->attempted[k] = 1;
      send_kernel<<<1, 1, 0, s>>>(f, (uint32_t)bytes, nchunks, reps, dc, tns, dbuf);
      CUCK(cudaGetLastError());
      rc = finish(rank, s, px, c, what);
      if (rc == 0) {
        CUCK(cudaMemcpy(&hns, dbuf, sizeof(hns), cudaMemcpyDeviceToHost));
        r->reps[k] = reps;
        r->us_msg[k] = hns / 1e3 / reps;
        r->gbs[k] = (double)bytes * reps / (double)hns;
      }
    } else {
      *received += (uint64_t)reps + 1;
      wait_kernel<<<1, 1, 0, s>>>(sem, *received, dc, tns);
      CUCK(cudaGetLastError());
      rc = finish(rank, s, px, c, what);
      if (rc == 0) {
        CUCK(cudaMemsetAsync(dbuf + 1, 0, sizeof(*dbuf), s));
        verify_kernel<<<264, 512, 0, s>>>((const unsigned char *)dst, bytes, GUARD, seed, dbuf + 1);
        CUCK(cudaMemcpyAsync(&hbad, dbuf + 1, sizeof(hbad), cudaMemcpyDeviceToHost, s));
        CUCK(cudaStreamSynchronize(s));
        r->tested[k] = 1;
        r->pass[k] = hbad == 0;
        if (hbad != 0) {
          fprintf(stderr, "rank %d: %s: %llu bytes wrong (message or guard)\n", rank, what, hbad);
          rc = 1;
        }
      }
    }
    /* Both ranks learn whether this size went well before the next one starts. */
    int both[2] = {0, 0};
    both[rank] = rc;
    CK(pcl_bootstrap_allgather(b, both, sizeof(int)));
    if (both[0] != 0 || both[1] != 0)
      rc = rc ? rc : 1;
  }
  cudaFree(dbuf);
  return rc;
}

static int latency(int rank, int cs, pcl_bootstrap_t *b, pcl_proxy_t *px, ctl_t *c, ctl_t *dc,
                   void *src, void *dst, uint64_t *sem, uint64_t *received, cudaStream_t s) {
  case_res_t *r = &g_res[cs];
  const uint64_t tns = (uint64_t)g_timeout_s * 1000000000ull;
  int iters = g_iters > 0 ? g_iters : cs == CASE_CE ? 2000 : 500, warm = 100;
  unsigned long long *dns = NULL, hns = 0;
  CUCK(cudaMalloc(&dns, sizeof(*dns)));
  CUCK(cudaMemset(dst, 0, 8));
  CK(pcl_bootstrap_barrier(b));
  if (rank == 0)
    r->lat_ran = 1;
  pingpong_kernel<<<1, 1, 0, s>>>(pcl_proxy_fifo(px), rank, warm, iters, (uint64_t *)src,
                                  (const uint64_t *)dst, sem, *received, dc, tns, dns);
  CUCK(cudaGetLastError());
  char what[64];
  snprintf(what, sizeof(what), "%s: ping-pong", k_case_name[cs]);
  int rc = finish(rank, s, px, c, what);
  *received += (uint64_t)(warm + iters);
  if (rc == 0 && rank == 0) {
    CUCK(cudaMemcpy(&hns, dns, sizeof(hns), cudaMemcpyDeviceToHost));
    r->lat_iters = iters;
    r->lat_us = hns / 1e3 / (2.0 * iters);
  }
  int both[2] = {0, 0};
  both[rank] = rc;
  CK(pcl_bootstrap_allgather(b, both, sizeof(int)));
  if (rank == 0)
    r->lat_pass = both[0] == 0 && both[1] == 0;
  cudaFree(dns);
  return rc ? rc : (both[0] || both[1]);
}

/* What each rank publishes to the other. */
typedef struct {
  pcl_mem_remote_t exp[3];           /* the proxy's descriptors of src, dst, sem */
  pcl_mem_desc_t dst_desc, sem_desc; /* CE: CUDA IPC exports of dst and sem */
} xchg_t;

static int rank_main(int rank, int cs) {
  int peer = 1 - rank, ndev = 0, rc = 0;
  if (cs == CASE_TCP) {
    /* Two "hosts": set before anything reads the parameters (topology's host hash). */
    setenv("PLANCCL_HOST_ID", rank == 0 ? "port-test-host-a" : "port-test-host-b", 1);
  }
  pcl_param_reset();
  int64_t t = pcl_param_timeout_s();
  g_timeout_s = t > 0 ? (int)t : 60;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2)
    return 77;
  CUCK(cudaSetDevice(rank));
  case_res_t *r = &g_res[cs];
  pcl_bootstrap_t *b = NULL;
  pcl_topo_t *topo = NULL;
  pcl_proxy_t *px = NULL;
  pcl_mem_reg_t *reg_dst = NULL, *reg_sem = NULL;
  pcl_mem_import_t *imp_dst = NULL, *imp_sem = NULL;
  void *src = NULL, *dst = NULL;
  uint64_t *sem = NULL, received = 0;
  ctl_t *c = NULL, *dc = NULL;
  cudaStream_t s = NULL;
  xchg_t *x = NULL;
  CK(pcl_bootstrap_create(&g_handle, rank, 2, NULL, &b));
  CK(pcl_topo_create(b, rank, &topo));
  pcl_transport_kind_t kind = pcl_transport_choose(topo, rank, peer);
  if (rank == 0)
    snprintf(r->chosen, sizeof(r->chosen), "%s", pcl_transport_name(kind));
  if (kind != k_case_kind[cs]) {
    if (cs == CASE_TCP && kind == PCL_TRANSPORT_IB) {
      /* An HCA is present: the topology rightly prefers it; exercise TCP anyway. */
      if (rank == 0)
        snprintf(r->note, sizeof(r->note), "topology chose ib (an HCA is present); tcp forced");
    } else {
      FAIL("the topology chose %s, expected %s", pcl_transport_name(kind), k_case_name[cs]);
    }
  }
  kind = k_case_kind[cs];

  CUCK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUCK(cudaMalloc(&src, g_max_bytes));
  CUCK(cudaMalloc(&dst, g_max_bytes + GUARD));
  CUCK(cudaMalloc((void **)&sem, 256));
  CUCK(cudaMemset(sem, 0, 256));
  CUCK(cudaHostAlloc((void **)&c, sizeof(*c), cudaHostAllocMapped));
  memset((void *)c, 0, sizeof(*c));
  CUCK(cudaHostGetDevicePointer((void **)&dc, c, 0));

  pcl_proxy_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = rank;
  cfg.nranks = 2;
  cfg.cuda_dev = rank;
  cfg.bootstrap = b;
  cfg.abort_flag = &c->abort;
  cfg.fifo_mem = PCL_FIFO_MEM_AUTO;
  CK(pcl_proxy_create(&cfg, &px));
  CK(pcl_proxy_connect(px, peer, kind));
  x = (xchg_t *)calloc(2, sizeof(xchg_t));
  if (x == NULL)
    FAIL("out of memory");
  CK(pcl_proxy_mem_reg(px, MEM_SRC, src, g_max_bytes, 1, 0, &x[rank].exp[MEM_SRC]));
  CK(pcl_proxy_mem_reg(px, MEM_DST, dst, g_max_bytes + GUARD, 1, 0, &x[rank].exp[MEM_DST]));
  CK(pcl_proxy_mem_reg(px, MEM_SEM, sem, 256, 1, 0, &x[rank].exp[MEM_SEM]));
  if (kind == PCL_TRANSPORT_CE) {
    CK(pcl_mem_reg(dst, g_max_bytes + GUARD, &reg_dst));
    CK(pcl_mem_reg(sem, 256, &reg_sem));
    x[rank].dst_desc = *pcl_mem_reg_desc(reg_dst);
    x[rank].sem_desc = *pcl_mem_reg_desc(reg_sem);
  }
  CK(pcl_bootstrap_allgather(b, x, sizeof(xchg_t)));
  pcl_mem_remote_t rdst = x[peer].exp[MEM_DST], rsem = x[peer].exp[MEM_SEM];
  if (kind == PCL_TRANSPORT_CE) {
    /* The copy engine writes through the peer's buffers mapped into this process. */
    CK(pcl_mem_import(&x[peer].dst_desc, rank, &imp_dst));
    CK(pcl_mem_import(&x[peer].sem_desc, rank, &imp_sem));
    rdst.mapped = (uint64_t)(uintptr_t)pcl_mem_import_ptr(imp_dst);
    rsem.mapped = (uint64_t)(uintptr_t)pcl_mem_import_ptr(imp_sem);
  }
  CK(pcl_proxy_mem_set_remote(px, MEM_DST, peer, &rdst));
  CK(pcl_proxy_mem_set_remote(px, MEM_SEM, peer, &rsem));
  pcl_proxy_channel_t ch;
  memset(&ch, 0, sizeof(ch));
  ch.peer = peer;
  ch.kind = kind;
  ch.sem_mem_id = MEM_SEM;
  ch.sem_off = 0;
  CK(pcl_proxy_channel_set(px, CHAN, &ch));
  CK(pcl_proxy_start(px));

  rc = bandwidth(rank, cs, b, px, c, dc, src, dst, sem, &received, s);
  if (rc == 0)
    rc = latency(rank, cs, b, px, c, dc, src, dst, sem, &received, s);
  /* Nobody tears its connection down while the peer may still send (skipped after a failure:
   * the peer may be gone; teardown never waits for it). */
  if (rc == 0 && pcl_bootstrap_barrier(b) != ncclSuccess)
    rc = 1;
  if (rc != 0)
    c->abort = 1;
  pcl_proxy_destroy(px);
  pcl_mem_import_close(imp_dst);
  pcl_mem_import_close(imp_sem);
  pcl_mem_dereg(reg_dst);
  pcl_mem_dereg(reg_sem);
  free(x);
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
  cudaFree(sem);
  cudaFreeHost((void *)c);
  pcl_topo_destroy(topo);
  pcl_bootstrap_destroy(b);
  return rc;
}

/* ---- parent: forks the two ranks of a case, kills them if they outlive the alarm ---- */

static volatile pid_t g_pids[2];
static volatile sig_atomic_t g_alarmed;

static void on_alarm(int sig) {
  (void)sig;
  g_alarmed = 1;
  for (int i = 0; i < 2; i++)
    if (g_pids[i] > 0)
      kill(g_pids[i], SIGKILL);
}

static int run_case(int cs) {
  int rc = 0;
  if (pcl_bootstrap_root_create(&g_handle) != ncclSuccess)
    return 1;
  g_res[cs].ran = 1;
  fflush(stdout);
  fflush(stderr);
  g_alarmed = 0;
  for (int r = 0; r < 2; r++) {
    pid_t p = fork();
    if (p == 0) {
      signal(SIGALRM, SIG_DFL);
      _exit(rank_main(r, cs));
    }
    g_pids[r] = p;
  }
  /* Bandwidth up to 256 MiB, the ping-pong and a few timeouts' worth of slack. */
  alarm((unsigned)(6 * g_timeout_s + 120));
  for (int r = 0; r < 2; r++) {
    int st = 0;
    pid_t w;
    while ((w = waitpid(g_pids[r], &st, 0)) < 0 && errno == EINTR) {
    }
    int code = w < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code != 0 && rc == 0)
      rc = code;
  }
  alarm(0);
  g_pids[0] = g_pids[1] = 0;
  if (g_alarmed) {
    fprintf(stderr, "transport_port: case %s hung; its ranks were killed\n", k_case_name[cs]);
    rc = rc ? rc : 124;
  }
  g_res[cs].failed = rc != 0 && rc != 77;
  return rc;
}

static void print_table(void) {
  printf("\nport channels driven by a kernel through the proxy, 2 processes on GPUs 0 and 1\n");
  printf("(rank 0 -> rank 1; up to %d chunks per message, then flag + flush; the ping-pong is an\n"
         "8-byte put + signal each way, one way = round trip / 2)\n",
         g_chunks);
  printf("%-5s %-9s %-10s %6s %11s %10s %s\n", "case", "transport", "size", "reps", "us/msg",
         "GB/s", "check");
  for (int cs = 0; cs < NCASES; cs++) {
    case_res_t *r = &g_res[cs];
    if (!r->ran)
      continue;
    for (int k = 0; k < NSIZES; k++) {
      if (!r->attempted[k])
        continue;
      char sz[24];
      fmt_size(sz, sizeof(sz), size_of(k));
      printf("%-5s %-9s %-10s %6d %11.2f %10.2f %s\n", k_case_name[cs], r->chosen, sz, r->reps[k],
             r->us_msg[k], r->gbs[k], r->tested[k] && r->pass[k] ? "pass" : "FAIL");
    }
    if (r->lat_ran)
      printf("%-5s %-9s %-10s %6d %8.2f us %10s %s\n", k_case_name[cs], r->chosen, "8 B 1-way",
             r->lat_iters, r->lat_us, "-", r->lat_pass ? "pass" : "FAIL");
    printf("%-5s %s%s%s\n", k_case_name[cs], r->failed ? "FAILED" : "ok", r->note[0] ? ": " : "",
           r->note);
  }
  printf("baseline (BASELINE.md): copy engine GPU0 -> GPU1 371-396 GB/s (~390); target: within "
         "10%% at the largest size\n");
  const case_res_t *ce = &g_res[CASE_CE];
  for (int k = NSIZES - 1; k >= 0; k--)
    if (ce->ran && ce->gbs[k] > 0) {
      char sz[24];
      fmt_size(sz, sizeof(sz), size_of(k));
      printf("copy engine at %s: %.1f GB/s = %.0f%% of 390 GB/s (%s the 90%% target)\n", sz,
             ce->gbs[k], 100.0 * ce->gbs[k] / 390.0, ce->gbs[k] >= 351.0 ? "meets" : "misses");
      break;
    }
  printf("tcp: a flush completes once the data is handed to the socket (the transport's\n"
         "contract), so its us/msg is the sender's pace; the receiver still checks every byte\n");
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
      g_max_bytes = (size_t)atoll(argv[++i]) << 20;
    else if (!strcmp(argv[i], "--chunks") && i + 1 < argc)
      g_chunks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      g_iters = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--only ce|tcp] [--max-mib N] [--chunks N] [--iters N]\n"
              "  PLANCCL_TIMEOUT_S: kernel wait timeout (default 60)\n",
              argv[0]);
      return 2;
    }
  }
  if (g_max_bytes < 4096 || g_max_bytes > (1ull << 31) || g_chunks < 1 || g_chunks > 256) {
    fprintf(stderr, "transport_port: --max-mib must be 1..2048 and --chunks 1..256\n");
    return 2;
  }
  if (getenv("PLANCCL_SOCKET_IFNAME") == NULL)
    setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  if (getenv("PLANCCL_BOOTSTRAP_TIMEOUT_S") == NULL)
    setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "60", 1);
  if (getenv("PLANCCL_TIMEOUT_S") == NULL)
    setenv("PLANCCL_TIMEOUT_S", "60", 1);
  g_timeout_s = atoi(getenv("PLANCCL_TIMEOUT_S"));
  if (g_timeout_s <= 0)
    g_timeout_s = 60;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
  sigaction(SIGALRM, &sa, NULL);
  g_res = (case_res_t *)mmap(NULL, sizeof(case_res_t) * NCASES, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_res == MAP_FAILED)
    return 1;
  memset(g_res, 0, sizeof(case_res_t) * NCASES);
  /* This process makes no CUDA call: every rank is a fresh child. */
  int rc = 0;
  for (int cs = 0; cs < NCASES; cs++) {
    if (only != NULL && strcmp(only, k_case_name[cs]) != 0)
      continue;
    int r = run_case(cs);
    if (r == 77) {
      printf("transport_port: needs 2 GPUs, skipping\n");
      return 77;
    }
    if (r != 0 && rc == 0)
      rc = r;
  }
  print_table();
  return rc;
}
