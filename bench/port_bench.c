/* SPDX-License-Identifier: MIT
 * planccl-portbench: port channels over TCP between two processes, driven through the real proxy
 * by a host producer (playing the GPU): bandwidth of put + signal + flush per size and the
 * one-way latency of an 8-byte put + signal beside a plain socket's (the host's floor), every
 * byte checked. Host or GPU memory (--device). --gap-us: each round trip after a quiet spell,
 * as the first collective after a compute phase meets a proxy that dozed through it. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench_opts.h"
#include "bench_spawn.h"
#include "bench_time.h"
#include "bootstrap.h"
#include "param.h"
#include "port_floor.h"
#include "port_probe.h"
#include "proxy.h"
#include "socket.h"

#define MEM_SRC 0u
#define MEM_DST 1u
#define MEM_SEM 2u
#define MAX_SIZES 32
#define MAX_ITERS 100000

typedef struct {
  size_t min_bytes, max_bytes;
  int iters, lat_iters, device, probe, threads;
  long gap_us; /* > 0: both ranks idle this long before each round trip, then "launch" */
  int no_kick; /* with gap_us: the launch is not announced to the proxy (pcl_proxy_expect) */
} opts_t;

/* Shared with the forked ranks: the setup handle in, rank 0's figures out. */
typedef struct {
  pcl_bootstrap_handle_t handle;
  opts_t o;
  int nsizes;
  size_t bytes[MAX_SIZES];
  double us_per_msg[MAX_SIZES];
  int wrong[MAX_SIZES];
  double lat_us[MAX_ITERS];
  int lat_n, lat_wrong;
  int dozing[2];              /* --gap-us: launches that found the rank's proxy in a long nap */
  double floor_us[MAX_ITERS]; /* the same round trips over a plain socket (tcp_floor) */
  int floor_n, floor_wrong;
  double floor_bw[2]; /* plain TCP at max_bytes: 1 socket, floor_socks sockets (port_floor.c) */
  int floor_socks;
} shared_t;

typedef struct {
  int rank, peer;
  const opts_t *o;
  pcl_bootstrap_t *b;
  pcl_proxy_t *px;
  pcl_fifo_device_t f;
  unsigned char *src, *dst, *host; /* host: staging for fills and checks (device mode) */
  uint64_t *sem;                   /* host memory: the peer's flags count here */
  uint64_t flags_seen;
} rank_t;

static unsigned char pattern(int rank, size_t bytes, size_t i) {
  return (unsigned char)(rank * 37 + bytes * 5 + i * 11 + (i >> 10));
}

/* Waits for the peer's next flag; 0, or -1 on a proxy error or after 30 s. */
static int wait_flag(rank_t *r) {
  r->flags_seen++;
  double end = bench_now_us() + 30e6;
  for (unsigned spin = 0;; spin++) {
    if (atomic_load_explicit((_Atomic uint64_t *)r->sem, memory_order_acquire) >= r->flags_seen)
      return 0;
    /* The waiter stands in for a GPU kernel: it must not take the proxy's or the receiver's
     * core, so it yields between polls. */
    sched_yield();
    if ((spin & 1023u) == 0 && (pcl_proxy_error(r->px) != ncclSuccess || bench_now_us() > end)) {
      fprintf(stderr, "planccl-portbench: rank %d: no flag %llu from rank %d\n", r->rank,
              (unsigned long long)r->flags_seen, r->peer);
      return -1;
    }
  }
}

/* put(bytes at offset 0) + flag; with sync, waits until the proxy reports it flushed. */
static int send_msg(rank_t *r, size_t bytes, int sync) {
  uint32_t type = PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_FLAG | (sync ? PCL_FIFO_TYPE_SYNC : 0);
  uint64_t pos = pcl_fifo_host_push(r->f, pcl_fifo_w0((uint32_t)bytes, 0),
                                    pcl_fifo_w1(type, MEM_SRC, MEM_DST, 0, 0), NULL);
  if (pos == UINT64_MAX)
    return -1;
  return sync ? pcl_fifo_host_wait(r->f, pos, NULL) : 0;
}

static int copy(void *dst, const void *src, size_t n, int device, enum cudaMemcpyKind k) {
  if (!device) {
    memcpy(dst, src, n);
    return 0;
  }
  /* cudaMemcpy from pageable memory may return before the data reaches the GPU, and the proxy
   * reads the source on a stream of its own, which does not wait for the legacy stream: wait
   * for the device before handing the buffer to the proxy. */
  return cudaMemcpy(dst, src, n, k) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess ? 0
                                                                                             : -1;
}

/* Rank 1 checks its destination against rank 0's pattern (copied out of GPU memory first). */
static int check_dst(rank_t *r, shared_t *sh, int s) {
  size_t bytes = sh->bytes[s];
  if (copy(r->host, r->dst, bytes, r->o->device, cudaMemcpyDeviceToHost) != 0)
    return -1;
  for (size_t i = 0; i < bytes; i++)
    sh->wrong[s] += r->host[i] != pattern(r->peer, bytes, i);
  return 0;
}

/* One message each way: rank 0's put + signal + flush, rank 1's 8-byte reply flag (rank 1 first
 * checks the data when `check`). */
static int exchange(rank_t *r, shared_t *sh, int s, int check) {
  if (r->rank == 0)
    return send_msg(r, sh->bytes[s], 1) == 0 && wait_flag(r) == 0 ? 0 : -1;
  if (wait_flag(r) != 0 || (check && check_dst(r, sh, s) != 0))
    return -1;
  return send_msg(r, 8, 0);
}

/* Rank 0 sends `bytes` (put + signal + flush) and waits for rank 1's 8-byte reply flag. An
 * untimed first message is checked; rank 1 then clears its destination, and after the timed
 * messages (no checks inside: a check of 64 MiB would cost more than the transfer) checks it
 * again. us per message from rank 0's side. */
static int bandwidth(rank_t *r, shared_t *sh, int s) {
  size_t bytes = sh->bytes[s];
  for (size_t i = 0; i < bytes; i++)
    r->host[i] = pattern(r->rank, bytes, i);
  if (copy(r->src, r->host, bytes, r->o->device, cudaMemcpyHostToDevice) != 0 ||
      pcl_bootstrap_barrier(r->b) != ncclSuccess || exchange(r, sh, s, 1) != 0)
    return -1;
  if (r->rank == 1) {
    memset(r->host, 0, bytes);
    if (copy(r->dst, r->host, bytes, r->o->device, cudaMemcpyHostToDevice) != 0)
      return -1;
  }
  if (pcl_bootstrap_barrier(r->b) != ncclSuccess)
    return -1;
  double t0 = bench_now_us();
  for (int it = 0; it < r->o->iters; it++)
    if (exchange(r, sh, s, 0) != 0)
      return -1;
  if (r->rank == 0)
    sh->us_per_msg[s] = (bench_now_us() - t0) / r->o->iters;
  else if (check_dst(r, sh, s) != 0)
    return -1;
  return pcl_bootstrap_barrier(r->b) == ncclSuccess ? 0 : -1;
}

/* put(bytes from source offset off to the same destination offset) + flag, not synchronised. */
static int send_at(rank_t *r, size_t bytes, uint32_t off) {
  uint64_t pos = pcl_fifo_host_push(
      r->f, pcl_fifo_w0((uint32_t)bytes, off),
      pcl_fifo_w1(PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_FLAG, MEM_SRC, MEM_DST, off, 0), NULL);
  return pos == UINT64_MAX ? -1 : 0;
}

/* What a kernel launch costs before its first trigger lands (3.5-4 us on the H200 host). */
#define LAUNCH_US 4.0

/* --gap-us: the rank computed for gap_us (no port-channel traffic), then launches its kernel:
 * the launch is announced to the proxy as the executor does (unless --no-kick), and its first
 * trigger comes LAUNCH_US later. */
static void quiet_then_launch(rank_t *r, shared_t *sh) {
  usleep((useconds_t)r->o->gap_us);
  sh->dozing[r->rank] += pcl_proxy_dozing(r->px);
  if (!r->o->no_kick)
    pcl_proxy_expect(r->px);
  const double go = bench_now_us() + LAUNCH_US;
  while (bench_now_us() < go)
    ;
}

/* 8-byte ping-pong. Round trip `it` moves value it from slot it of the source (8-byte slots,
 * modulo the buffer) to the same slot of the destination; the sources are written before the
 * timed loop, so in GPU memory the loop holds the transport's own copies and no copy of the
 * bench's. Host memory: each value is checked at its flag (the data arrived before it); GPU
 * memory: every slot's last value after the loop (a copy per round trip would be timed). */
static int latency(rank_t *r, shared_t *sh) {
  const int n = r->o->lat_iters;
  const size_t slots = r->o->max_bytes / 8;
  const size_t used = (size_t)n < slots ? (size_t)n : slots;
  uint64_t *vals = (uint64_t *)(void *)r->host;
  for (size_t k = 0; k < used; k++)
    vals[k] = ~0ull;
  for (int it = 0; it < n; it++)
    vals[(size_t)it % slots] = (uint64_t)it;
  if (copy(r->src, vals, used * 8, r->o->device, cudaMemcpyHostToDevice) != 0)
    return -1;
  memset(vals, 0xff, used * 8); /* the destination starts unlike every value */
  if (copy(r->dst, vals, used * 8, r->o->device, cudaMemcpyHostToDevice) != 0 ||
      pcl_bootstrap_barrier(r->b) != ncclSuccess)
    return -1;
  const volatile uint64_t *dst = (const volatile uint64_t *)(void *)r->dst;
  for (int it = 0; it < n; it++) {
    const uint32_t off = (uint32_t)(((size_t)it % slots) * 8);
    if (r->o->gap_us > 0)
      quiet_then_launch(r, sh);
    double t0 = bench_now_us();
    if (r->rank == 1) {
      if (wait_flag(r) != 0)
        return -1;
      if (!r->o->device && dst[off / 8] != (uint64_t)it)
        sh->lat_wrong++;
    }
    if (send_at(r, 8, off) != 0)
      return -1;
    if (r->rank == 0) {
      if (wait_flag(r) != 0)
        return -1;
      if (!r->o->device && dst[off / 8] != (uint64_t)it)
        sh->lat_wrong++;
      sh->lat_us[it] = (bench_now_us() - t0) / 2;
      sh->lat_n = it + 1;
    }
  }
  if (copy(vals, r->dst, used * 8, r->o->device, cudaMemcpyDeviceToHost) != 0)
    return -1;
  for (int it = n - (int)used; it < n; it++) /* each slot's last value */
    sh->lat_wrong += vals[(size_t)it % slots] != (uint64_t)it;
  return pcl_bootstrap_barrier(r->b) == ncclSuccess ? 0 : -1;
}

/* The host's floor under the latency above: the same 8-byte round trips between the same two
 * processes over one plain loopback TCP socket of the transport's kind (non-blocking,
 * TCP_NODELAY, poll), sent and received by the ranks' own threads: no FIFO, proxy or receiver
 * thread hand-offs, no staging. The port channel's latency minus this is planccl's share. */
#define FLOOR_TAG 7701
static int tcp_floor(rank_t *r, shared_t *sh) {
  int fd = -1, rc = -1;
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "planccl-portbench: plain TCP floor");
  if (port_floor_connect(r->b, r->rank, FLOOR_TAG, &fd, 1) != 0)
    return -1;
  for (int it = 0; it < r->o->lat_iters; it++) {
    uint64_t v = (uint64_t)it, got = ~0ull;
    double t0 = bench_now_us();
    if (r->rank == 0) {
      if (pcl_socket_send(fd, &v, 8, &w) != ncclSuccess ||
          pcl_socket_recv(fd, &got, 8, &w) != ncclSuccess)
        goto out;
      sh->floor_us[it] = (bench_now_us() - t0) / 2;
      sh->floor_wrong += got != v;
      sh->floor_n = it + 1;
    } else if (pcl_socket_recv(fd, &got, 8, &w) != ncclSuccess ||
               pcl_socket_send(fd, &got, 8, &w) != ncclSuccess) {
      goto out;
    }
  }
  rc = 0;
out:
  pcl_socket_close(&fd);
  return rc;
}

static int setup(rank_t *r, shared_t *sh) {
  size_t max = sh->o.max_bytes;
  pcl_mem_remote_t exp[2][3];
  memset(exp, 0, sizeof(exp));
  r->sem = aligned_alloc(64, 64);
  r->host = malloc(max);
  if (r->sem == NULL || r->host == NULL)
    return -1;
  memset(r->sem, 0, 64);
  if (sh->o.device) {
    if (cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&r->src, max) != cudaSuccess ||
        cudaMalloc((void **)&r->dst, max) != cudaSuccess)
      return -1;
  } else if ((r->src = malloc(max)) == NULL || (r->dst = malloc(max)) == NULL) {
    return -1;
  }
  pcl_proxy_config_t cfg = {.rank = r->rank,
                            .nranks = 2,
                            .cuda_dev = sh->o.device ? 0 : -1,
                            .bootstrap = r->b,
                            .fifo_mem = PCL_FIFO_MEM_HOST,
                            .fifo_size = 64};
  pcl_proxy_channel_t ch = {
      .peer = r->peer, .kind = PCL_TRANSPORT_TCP, .sem_mem_id = MEM_SEM, .sem_off = 0};
  if (pcl_proxy_create(&cfg, &r->px) != ncclSuccess ||
      pcl_proxy_connect(r->px, r->peer, PCL_TRANSPORT_TCP) != ncclSuccess ||
      pcl_proxy_mem_reg(r->px, MEM_SRC, r->src, max, sh->o.device, 0, &exp[r->rank][MEM_SRC]) !=
          ncclSuccess ||
      pcl_proxy_mem_reg(r->px, MEM_DST, r->dst, max, sh->o.device, 0, &exp[r->rank][MEM_DST]) !=
          ncclSuccess ||
      pcl_proxy_mem_reg(r->px, MEM_SEM, r->sem, 64, 0, 0, &exp[r->rank][MEM_SEM]) != ncclSuccess ||
      pcl_bootstrap_allgather(r->b, exp, sizeof(exp[0])) != ncclSuccess ||
      pcl_proxy_mem_set_remote(r->px, MEM_DST, r->peer, &exp[r->peer][MEM_DST]) != ncclSuccess ||
      pcl_proxy_mem_set_remote(r->px, MEM_SEM, r->peer, &exp[r->peer][MEM_SEM]) != ncclSuccess ||
      pcl_proxy_channel_set(r->px, 0, &ch) != ncclSuccess || pcl_proxy_start(r->px) != ncclSuccess)
    return -1;
  r->f = pcl_proxy_fifo(r->px);
  return 0;
}

static int rank_main(int rank, void *arg) {
  shared_t *sh = arg;
  rank_t r = {.rank = rank, .peer = 1 - rank, .o = &sh->o};
  int rc = -1;
  if (pcl_bootstrap_create(&sh->handle, rank, 2, NULL, &r.b) != ncclSuccess || setup(&r, sh) != 0)
    goto out;
  for (int s = 0; s < sh->nsizes; s++)
    if (bandwidth(&r, sh, s) != 0)
      goto out;
  if (latency(&r, sh) != 0 || tcp_floor(&r, sh) != 0)
    goto out;
  /* The bandwidth floor: one socket, and as many as a port-channel connection has. */
  const int socks = (int)pcl_param_tcp_streams();
  double bw1 = port_floor_bw(r.b, rank, r.host, sh->o.max_bytes, 1, 3);
  double bwk = bw1 < 0 ? -1 : port_floor_bw(r.b, rank, r.host, sh->o.max_bytes, socks, 3);
  if (bwk < 0)
    goto out;
  if (rank == 0) {
    sh->floor_bw[0] = bw1;
    sh->floor_bw[1] = bwk;
    sh->floor_socks = socks;
  }
  rc = pcl_proxy_error(r.px) == ncclSuccess ? 0 : -1;
out:
  if (rc == 0)
    (void)pcl_bootstrap_barrier(r.b); /* both stop sending before either disconnects */
  pcl_proxy_destroy(r.px);
  pcl_bootstrap_destroy(r.b);
  if (sh->o.device) {
    cudaFree(r.src);
    cudaFree(r.dst);
  } else {
    free(r.src);
    free(r.dst);
  }
  free(r.host);
  free(r.sem);
  return rc == 0 ? 0 : 1;
}

/* bench_parse_bytes (K/M/G suffixes), 0 for anything it refuses. */
static size_t parse_size(const char *s) {
  long long v = bench_parse_bytes(s);
  return v > 0 ? (size_t)v : 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "planccl-portbench: %s\n"
          "usage: planccl-portbench [-b MIN] [-e MAX] [-n ITERS] [--lat-iters N] [--gap-us G] "
          "[--no-kick] [--device] [--threads] [--probe]\n"
          "  -b/-e  sizes (K/M/G suffixes; x4 steps; default 4K .. 64M, at most 1G)\n"
          "  -n     put + signal + flush messages per size (default 20)\n"
          "  --lat-iters  8-byte round trips for the latency (default 2000, at most 100000)\n"
          "  --gap-us G   both ranks idle G us before each round trip, then launch (the launch\n"
          "               announced to the proxy as planned calls do; --no-kick: not announced)\n"
          "  --device     buffers in GPU memory (device 0, both processes)\n"
          "  --threads    the two ranks as threads of one process (one CUDA context, as two\n"
          "               processes on two GPUs; two processes on one GPU time-slice)\n"
          "  --probe      instead: 8-byte GPU copies, one process alone and two taking turns\n"
          "  PLANCCL_TCP_STREAMS sets the sockets per connection (large puts are striped)\n",
          why);
  return 2;
}

static int parse(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.min_bytes = 4096, .max_bytes = 64u << 20, .iters = 20, .lat_iters = 2000};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--device")) {
      o->device = 1;
      continue;
    }
    if (!strcmp(a, "--threads")) {
      o->threads = 1;
      continue;
    }
    if (!strcmp(a, "--probe")) {
      o->probe = 1;
      continue;
    }
    if (!strcmp(a, "--no-kick")) {
      o->no_kick = 1;
      continue;
    }
    if (v == NULL)
      return usage(!strcmp(a, "-h") || !strcmp(a, "--help") ? "help" : "missing value");
    i++;
    if (!strcmp(a, "-b"))
      o->min_bytes = parse_size(v);
    else if (!strcmp(a, "-e"))
      o->max_bytes = parse_size(v);
    else if (!strcmp(a, "-n"))
      o->iters = atoi(v);
    else if (!strcmp(a, "--lat-iters"))
      o->lat_iters = atoi(v);
    else if (!strcmp(a, "--gap-us"))
      o->gap_us = atol(v);
    else
      return usage("unknown option");
  }
  if (o->min_bytes < 8 || o->max_bytes < o->min_bytes || o->max_bytes > (1u << 30))
    return usage("sizes must satisfy 8 <= -b <= -e <= 1G");
  if (o->iters < 1 || o->lat_iters < 1 || o->lat_iters > MAX_ITERS)
    return usage("-n and --lat-iters must be positive (--lat-iters at most 100000)");
  if (o->gap_us < 0 || o->gap_us > 10000000)
    return usage("--gap-us must lie in [0, 10000000]");
  return 0;
}

static int report(shared_t *sh) {
  int bad = sh->lat_wrong != 0 || sh->lat_n != sh->o.lat_iters;
  printf("# planccl-portbench: TCP port channels between 2 %s (loopback), %s memory, "
         "put + signal + flush per message, %d per size\n",
         sh->o.threads ? "threads of one process" : "processes", sh->o.device ? "GPU" : "host",
         sh->o.iters);
  printf("%12s %12s %10s %8s\n", "bytes", "us/msg", "GB/s", "#wrong");
  for (int s = 0; s < sh->nsizes; s++) {
    printf("%12zu %12.2f %10.3f %8d\n", sh->bytes[s], sh->us_per_msg[s],
           (double)sh->bytes[s] / (sh->us_per_msg[s] * 1e3), sh->wrong[s]);
    bad |= sh->wrong[s] != 0;
  }
  if (sh->lat_n > 0) {
    qsort(sh->lat_us, (size_t)sh->lat_n, sizeof(double), bench_cmp_double);
    char gap[128] = "";
    if (sh->o.gap_us > 0)
      snprintf(gap, sizeof(gap),
               ", each after %ld us idle (proxies dozing at %d + %d launches) and a launch %s",
               sh->o.gap_us, sh->dozing[0], sh->dozing[1],
               sh->o.no_kick ? "not announced to them" : "announced to them");
    printf("# 8-byte put + signal, one way (round trip / 2) over %d round trips%s: median %.2f us, "
           "p99 %.2f us, max %.2f us, #wrong %d\n",
           sh->lat_n, gap, sh->lat_us[sh->lat_n / 2],
           sh->lat_us[(int)floor(0.99 * (sh->lat_n - 1))], sh->lat_us[sh->lat_n - 1],
           sh->lat_wrong);
  }
  bad |= sh->floor_wrong != 0 || sh->floor_n != sh->o.lat_iters;
  if (sh->floor_n > 0) {
    qsort(sh->floor_us, (size_t)sh->floor_n, sizeof(double), bench_cmp_double);
    printf("# plain TCP socket between the same processes, 8 bytes one way (the host's floor): "
           "median %.2f us, p99 %.2f us, #wrong %d\n",
           sh->floor_us[sh->floor_n / 2], sh->floor_us[(int)floor(0.99 * (sh->floor_n - 1))],
           sh->floor_wrong);
  }
  if (sh->floor_socks > 0)
    printf("# plain TCP between the same processes, %zu bytes one way, a thread per socket (the "
           "host's bandwidth floor): 1 socket %.3f GB/s, %d sockets %.3f GB/s\n",
           sh->o.max_bytes, sh->floor_bw[0], sh->floor_socks, sh->floor_bw[1]);
  bad |= sh->floor_socks == 0;
  return bad;
}

typedef struct {
  shared_t *sh;
  int rank, rc;
} thread_arg_t;

static void *thread_main(void *arg) {
  thread_arg_t *t = arg;
  t->rc = rank_main(t->rank, t->sh);
  return NULL;
}

/* --threads: both ranks in this process. A rank that fails lets its peer fail at its next
 * bounded wait (flags and barriers time out). */
static int run_threads(shared_t *sh) {
  pthread_t th[2];
  thread_arg_t ta[2] = {{sh, 0, 1}, {sh, 1, 1}};
  int started = 0;
  for (; started < 2; started++)
    if (pthread_create(&th[started], NULL, thread_main, &ta[started]) != 0)
      break;
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  return started == 2 && ta[0].rc == 0 && ta[1].rc == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  opts_t o;
  int rc = parse(argc, argv, &o);
  if (rc != 0)
    return rc;
  if (o.probe)
    return port_probe_run() == 0 ? 0 : 1;
  shared_t *sh = bench_shm_alloc(sizeof(*sh));
  if (sh == NULL)
    return 1;
  sh->o = o;
  for (size_t b = o.min_bytes; b <= o.max_bytes && sh->nsizes < MAX_SIZES; b *= 4)
    sh->bytes[sh->nsizes++] = b;
  /* The root's thread runs in this process; the ranks are forked before any CUDA call. */
  if (pcl_bootstrap_root_create(&sh->handle) != ncclSuccess) {
    fprintf(stderr, "planccl-portbench: cannot start the bootstrap root\n");
    bench_shm_free(sh, sizeof(*sh));
    return 1;
  }
  rc = (o.threads ? run_threads(sh) : bench_spawn(2, rank_main, sh, "port bench", 600, 5, NULL)) !=
       0;
  if (rc)
    fprintf(stderr, "planccl-portbench: a rank failed\n");
  rc |= report(sh);
  /* One verdict line: ctest matches it (a pass pattern ignores the exit status). */
  printf("# result: %s\n", rc ? "FAILED" : "ok, every byte as sent");
  bench_shm_free(sh, sizeof(*sh));
  return rc ? 1 : 0;
}
